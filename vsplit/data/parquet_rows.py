"""Rows of a Parquet table (a file or a folder of files) read on demand, a row group at a time, in bounded memory.

A party whose aligned table does not fit in memory keeps it in Parquet and asks for the rows of each training batch:
:meth:`ParquetRows.take` finds the row groups those rows live in, reads each group's needed columns once (through
:mod:`pyarrow.dataset`, so only the requested columns are decoded), and keeps at most ``cache_groups`` decoded
groups, least recently used first out. Memory is then bounded by ``cache_groups`` times a row group, whatever the
size of the table; write the table with row groups about the size you want to hold (``pyarrow.parquet.write_table(
..., row_group_size=65536)``). :meth:`ParquetRows.batches` streams the whole table in order with a dataset scanner.

Example:
    >>> import pathlib, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "aligned.parquet"
    >>> pq.write_table(pa.table({"x": [0.0, 1.0, 2.0, 3.0, 4.0], "y": [0, 1, 0, 1, 0]}), path, row_group_size=2)
    >>> rows = ParquetRows(path, cache_groups=2)
    >>> len(rows), rows.groups
    (5, 3)
    >>> rows.take([4, 0, 3]).column("x").to_pylist()
    [4.0, 0.0, 3.0]
    >>> rows.numpy([1, 2], columns=["x", "y"]).tolist()
    [[1.0, 1.0], [2.0, 0.0]]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vsplit.errors import DataError


class ParquetRows:
    """Random and sequential access to the rows of a Parquet file or folder, with a bounded cache of row groups.

    Args:
        path: a ``.parquet`` file, or a folder of them (read in sorted file-name order).
        columns: the columns to read (default: all).
        cache_groups: how many decoded row groups to keep (at least 1).

    Attributes:
        reads: row groups decoded so far (a cache miss each).
    """

    def __init__(self, path: str | Path, *, columns: Sequence[str] | None = None, cache_groups: int = 4) -> None:
        import pyarrow.dataset as ds

        path = Path(path)
        if not path.exists():
            raise DataError(f"{path}: no such Parquet file or folder; check data.path in the party config")
        if cache_groups < 1:
            raise DataError(f"cache_groups: {cache_groups} must be at least 1")
        self.path = path
        files = sorted(str(f) for f in path.glob("*.parquet")) if path.is_dir() else [str(path)]
        if not files:
            raise DataError(f"{path}: the folder holds no .parquet files")
        self._dataset = ds.dataset(files, format="parquet")
        names = self._dataset.schema.names
        self.columns = list(columns) if columns is not None else names
        if missing := [c for c in self.columns if c not in names]:
            raise DataError(f"{path}: columns {missing} not found (it has {names}); fix the column names")
        self._groups: list[Any] = []
        sizes: list[int] = []
        for fragment in self._dataset.get_fragments():  # in the order of ``files``
            for group in fragment.split_by_row_group():
                group.ensure_complete_metadata()
                self._groups.append(group)
                sizes.append(group.row_groups[0].num_rows)
        self._starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._cache_groups = cache_groups
        self.reads = 0

    def __len__(self) -> int:
        return int(self._starts[-1])

    @property
    def schema(self) -> Any:
        """The :class:`pyarrow.Schema` of the requested columns."""
        return self._dataset.schema.empty_table().select(self.columns).schema

    @property
    def groups(self) -> int:
        """Row groups in the table."""
        return len(self._groups)

    def take(self, rows: Sequence[int] | np.ndarray) -> Any:
        """The ``rows`` (any order, repeats allowed) as a :class:`pyarrow.Table`, in the order asked."""
        import pyarrow as pa

        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= len(self)):
            low, high = int(rows.min()), int(rows.max())
            raise DataError(f"{self.path}: rows must be in 0..{len(self) - 1}, got {low}..{high}")
        if rows.size == 0:
            return self._dataset.schema.empty_table().select(self.columns)
        group_of = np.searchsorted(self._starts, rows, side="right") - 1
        order = np.argsort(group_of, kind="stable")
        pieces = []
        for group in np.unique(group_of).tolist():
            local = rows[group_of == group] - self._starts[group]
            pieces.append(self._group(group).take(pa.array(local)))
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return pa.concat_tables(pieces).take(pa.array(inverse))

    def numpy(self, rows: Sequence[int] | np.ndarray, *, columns: Sequence[str], dtype: Any = np.float64) -> np.ndarray:
        """The ``columns`` of ``rows`` as one ``(len(rows), len(columns))`` array of ``dtype``."""
        table = self.take(rows)
        return np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype(dtype) for c in columns])

    def batches(self, batch_rows: int = 65536) -> Iterator[Any]:
        """Every row in table order, as :class:`pyarrow.RecordBatch` es of at most ``batch_rows`` rows."""
        scanner = self._dataset.scanner(columns=self.columns, batch_size=batch_rows, use_threads=False)
        for batch in scanner.to_batches():
            if batch.num_rows:
                yield batch

    def _group(self, group: int) -> Any:
        table = self._cache.get(group)
        if table is not None:
            self._cache.move_to_end(group)
            return table
        table = self._read(group)
        self._cache[group] = table
        if len(self._cache) > self._cache_groups:
            self._cache.popitem(last=False)
        return table

    def _read(self, group: int) -> Any:
        self.reads += 1
        return self._groups[group].to_table(columns=self.columns)
