"""A party's table left in its Parquet file: what :class:`~vsplit.party.FeatureParty` and
:class:`~vsplit.party.LabelParty` take instead of a DataFrame to train on a table larger than memory.

It answers what a party asks of its table without reading it whole: the column names (from the file's schema), one
column at a time (``table["y"]``: the labels, read batch by batch), the columns left after dropping some, the IDs as
an :class:`~vsplit.data.id_sources.IdSource` for PSI, and the fitted preprocessing
(:func:`~vsplit.data.stream_fit.fit_parquet`). The rows themselves are read per training batch
(:class:`~vsplit.data.batch_inputs.ParquetInputs`).

Example:
    >>> import pathlib, tempfile
    >>> import pandas as pd
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "bank.parquet"
    >>> pd.DataFrame({"customer_id": [7, 8], "age": [30, 40], "y": [0, 1], "junk": [0, 0]}).to_parquet(path)
    >>> table = open_table(path, id_column="customer_id", features=["age"], label="y")
    >>> table.columns, table["y"].tolist(), len(table)
    (['customer_id', 'age', 'y'], [0, 1], 2)
    >>> table.drop(columns=["customer_id", "y"]).columns
    ['age']
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vsplit.data.tables import check_columns
from vsplit.errors import DataError


class ParquetTable:
    """The ``columns`` of the Parquet file at ``path``, read on demand.

    Args:
        path: the ``.parquet`` file.
        columns: the columns the party uses (default: all of the file's).
        cache_groups: row groups kept decoded while training reads batches.
        batch_rows: rows per record batch in the streamed passes.
    """

    def __init__(self, path: str | Path, *, columns: Sequence[str] | None = None, cache_groups: int = 4,
                 batch_rows: int = 65536) -> None:
        import pyarrow.parquet as pq

        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(f"data file {self.path} not found; check data.path in the party config")
        self._file = pq.ParquetFile(self.path)
        names = list(self._file.schema_arrow.names)
        self.columns = list(columns) if columns is not None else names
        if missing := [c for c in self.columns if c not in names]:
            raise DataError(f"{self.path}: columns {missing} not found (it has {names}); fix the column names in "
                            "the party config's [data] section (data.id_column, data.label, data.features)")
        self.cache_groups = cache_groups
        self.batch_rows = batch_rows

    def __len__(self) -> int:
        return int(self._file.metadata.num_rows)

    def __getitem__(self, column: str) -> pd.Series:
        """One column, read batch by batch (the only column read)."""
        import pyarrow as pa

        if column not in self.columns:
            raise DataError(f"{self.path}: no column {column!r} (it has {self.columns}); fix the column name in the "
                            "party config")
        chunks = [b.column(0) for b in self._file.iter_batches(batch_size=self.batch_rows, columns=[column])]
        values = pa.chunked_array(chunks, type=self._file.schema_arrow.field(column).type)
        return pd.Series(values.to_pandas(), name=column)

    def drop(self, *, columns: Sequence[str]) -> ParquetTable:
        """The same file without ``columns``."""
        return ParquetTable(self.path, columns=[c for c in self.columns if c not in set(columns)],
                            cache_groups=self.cache_groups, batch_rows=self.batch_rows)

    def ids(self, column: str) -> Any:
        """The ``column`` of IDs as an ID source that streams them for PSI and reads back the aligned ones."""
        from vsplit.data.id_sources import ParquetIds

        return ParquetIds(self.path, column=column, read_back=True)

    def check(self, party: str, *, id_column: str, label: str | None = None, forbidden: Sequence[str] = ()) -> None:
        """The column checks of :func:`~vsplit.data.tables.check_table`; the IDs themselves (missing, duplicated) are
        checked by PSI as it streams them (``[psi] duplicates``)."""
        check_columns(party, list(self.columns), rows=len(self), id_column=id_column, label=label, forbidden=forbidden)


def open_table(path: str | Path, *, id_column: str, features: Sequence[str] | None = None,
               label: str | None = None) -> ParquetTable:
    """Like :func:`~vsplit.data.sources.read_table` for a Parquet file, without reading it: the ID column, the
    feature columns (default: all others) and the label."""
    table = ParquetTable(path)
    wanted = [id_column, *(features if features is not None else []), *([label] if label else [])]
    if missing := [c for c in wanted if c not in table.columns]:
        from vsplit.data.sources import column_keys

        raise DataError(f"{path}: columns {missing} not found (it has {table.columns}); fix "
                        f"{column_keys(missing, id_column=id_column, label=label)} in the party config")
    return table if features is None else ParquetTable(path, columns=list(dict.fromkeys(wanted)))
