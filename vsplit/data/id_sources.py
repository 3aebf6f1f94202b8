"""Where a party's IDs come from: an in-memory sequence, or a column of a Parquet or CSV file read in batches.

A source yields raw ID values in row order, batch by batch, and may be read more than once (the label party hashes
its IDs once per partner, under each pair's own salt). File sources never hold the whole column, so a party with
10 million IDs keeps only their 32-byte hashes, not 10 million Python strings.

Example:
    >>> src = as_source(["a", "b", "c"])
    >>> [list(batch) for batch in src.batches(2)]
    [['a', 'b'], ['c']]
    >>> src.values_at([2, 0])
    ['c', 'a']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from vsplit.errors import DataError


@runtime_checkable
class IdSource(Protocol):
    """A re-readable column of raw ID values in row order."""

    name: str

    def batches(self, size: int) -> Iterator[Sequence[object]]:
        """Yield the values in row order, at most ``size`` at a time."""

    def size_hint(self) -> int | None:
        """The number of rows if known without reading them, else ``None``."""

    def values_at(self, rows: Sequence[int]) -> list[object] | None:
        """The raw values at ``rows``, or ``None`` if this source does not keep them in memory."""


class SequenceIds:
    """IDs held in memory: a list, tuple, NumPy array or pandas Series (converted to a list once)."""

    def __init__(self, values: Sequence[object], *, name: str = "ids") -> None:
        self.values = values.tolist() if hasattr(values, "tolist") else list(values)
        self.name = name

    def batches(self, size: int) -> Iterator[Sequence[object]]:
        for start in range(0, len(self.values), size):
            yield self.values[start : start + size]

    def size_hint(self) -> int | None:
        return len(self.values)

    def values_at(self, rows: Sequence[int]) -> list[object] | None:
        values = self.values
        return [values[r] for r in (rows.tolist() if hasattr(rows, "tolist") else rows)]


class ParquetIds:
    """One column of a Parquet file, streamed with ``pyarrow`` in record batches.

    Args:
        path: the Parquet file.
        column: the ID column's name.
        read_back: :meth:`values_at` reads the asked rows' IDs back from the file (a party that orders its aligned
            rows by ID, as a training party does), instead of answering ``None``.
    """

    def __init__(self, path: str | Path, *, column: str, read_back: bool = False) -> None:
        import pyarrow.parquet as pq

        self.path, self.column, self.name = _id_column(path, column, lambda p: pq.read_schema(p).names)
        self.read_back = read_back

    def batches(self, size: int) -> Iterator[Sequence[object]]:
        import pyarrow.parquet as pq

        # A buffered stream without pre-buffering: pyarrow otherwise keeps the column chunks it read (131 MB for 8M
        # IDs, measured), so memory would grow with the table.
        with pq.ParquetFile(self.path, buffer_size=1 << 20, pre_buffer=False) as reader:
            for batch in reader.iter_batches(batch_size=size, columns=[self.column]):
                yield batch.column(0).to_pylist()

    def size_hint(self) -> int | None:
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.path).metadata.num_rows

    def values_at(self, rows: Sequence[int]) -> list[object] | None:
        if not self.read_back:
            return None
        from vsplit.data.parquet_rows import ParquetRows

        return ParquetRows(self.path, columns=[self.column]).take(rows).column(0).to_pylist()


class CsvIds:
    """One column of a CSV file, read with pandas in chunks. Values are read as text (``"00123"`` stays so).

    Args:
        path: the CSV file (with a header row).
        column: the ID column's name.
    """

    def __init__(self, path: str | Path, *, column: str) -> None:
        import pandas as pd

        self.path, self.column, self.name = _id_column(path, column, lambda p: list(pd.read_csv(p, nrows=0).columns))

    def batches(self, size: int) -> Iterator[Sequence[object]]:
        import pandas as pd

        chunks = pd.read_csv(
            self.path, usecols=[self.column], dtype={self.column: str}, keep_default_na=False, chunksize=size
        )
        with chunks as reader:
            for chunk in reader:
                yield chunk[self.column].tolist()

    def size_hint(self) -> int | None:
        return None

    def values_at(self, rows: Sequence[int]) -> list[object] | None:
        return None


def as_source(ids: Sequence[object] | IdSource, *, name: str = "ids") -> IdSource:
    """Wrap ``ids`` as an :class:`IdSource` unless it already is one."""
    if isinstance(ids, IdSource):
        return ids
    if isinstance(ids, (str, bytes)):
        raise DataError(f"{name}: IDs must be a sequence of values, not one {type(ids).__name__}")
    return SequenceIds(ids, name=name)


def _id_column(path: str | Path, column: str, columns_of: Callable[[Path], list[str]]) -> tuple[Path, str, str]:
    """Check that ``path`` exists and has ``column``; return the path, the column and the source's display name."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file; check the path of the ID table")
    names = columns_of(path)
    if column not in names:
        raise DataError(f"{path}: no column {column!r}; the columns are {', '.join(names)}")
    return path, column, f"{path.name}:{column}"
