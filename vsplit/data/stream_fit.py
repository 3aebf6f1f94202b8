"""Fit a :class:`~vsplit.data.preprocess.TablePreprocessor` from a Parquet file read batch by batch.

Theory of operation. :meth:`TablePreprocessor.fit` learns, from the whole table: which columns are categorical (by
dtype), the missing-value counts (an error under ``missing="error"``), each categorical column's sorted set of
values, the median of every numeric column with holes (``missing="impute"``), and the scaler. :func:`fit_parquet`
learns the same in one pass over the selected columns (plus one narrow pass to find integer and boolean columns with
nulls, whose pandas dtype over the whole table is float or object, so every batch is converted with that dtype):

- dtypes: :meth:`TablePreprocessor.choose_columns` on an empty frame of the file's (widened) dtypes;
- category sets: the union of each batch's values, sorted at the end: the same sets in the same order;
- ``"quantile"`` scaling: the scaler (:mod:`vsplit.data.quantile`) fits on ``subsample`` (10,000) rows drawn
  with the seeded generator from the row count alone, so the pass keeps exactly those rows and fits on them: the same
  quantiles, bit for bit (all rows when the table has at most 10,000);
- ``"standard"`` scaling: per-column count, mean and sum of squared deviations merged batch by batch in float64
  (Chan et al.), equal to NumPy's whole-column mean and std to float rounding (about 1e-15 relative), not bit for bit;
- medians under ``missing="impute"``: a second pass reads each numeric column that has holes, one column at a time
  (8 bytes per row while it is read), and takes NumPy's ``nanmedian``: exact, but not bounded by the batch size.

Example:
    >>> import pathlib, tempfile
    >>> import numpy as np, pandas as pd
    >>> from vsplit.data.preprocess import TablePreprocessor
    >>> table = pd.DataFrame({"job": ["a", "b", None, "a"], "x": [1.0, np.nan, 3.0, 4.0]})
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.parquet"
    >>> table.to_parquet(path, row_group_size=2)
    >>> streamed = fit_parquet(TablePreprocessor(missing="impute"), path, columns=["job", "x"], batch_rows=2)
    >>> fitted = TablePreprocessor(missing="impute").fit(table)
    >>> streamed.categories_ == fitted.categories_, streamed.imputed_ == fitted.imputed_
    (True, True)
    >>> bool(np.array_equal(streamed.state()["scaler"]["quantiles"], fitted.state()["scaler"]["quantiles"]))
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.data.column_types import show
from vsplit.data.parquet_rows import ParquetRows
from vsplit.data.preprocess import TablePreprocessor, raise_if_missing
from vsplit.data.quantile import SUBSAMPLE, QuantileScaler, subsample_rows
from vsplit.errors import DataError

#: rows the quantile scaler fits on (scikit-learn's ``subsample`` default), drawn from the row count alone
QUANTILE_SUBSAMPLE = SUBSAMPLE


def fit_parquet(prep: TablePreprocessor, path: str | Path, *, columns: Sequence[str],
                batch_rows: int = 65536) -> TablePreprocessor:
    """Fit ``prep`` on the ``columns`` of the Parquet table at ``path``, read ``batch_rows`` at a time."""
    rows = ParquetRows(path, columns=list(columns))  # unknown columns: an error naming them and the file's columns
    n = len(rows)
    if n == 0:
        raise DataError(f"{path}: cannot fit preprocessing on an empty table; give the party at least one row")
    widen = widened_columns(rows)
    prep.choose_columns(to_frame(rows.schema.empty_table(), widen))
    numeric = prep.numeric_
    sample = _quantile_rows(n, prep.seed) if prep.scaling == "quantile" and numeric else None
    holes = dict.fromkeys(prep.columns_, 0)
    first: dict[str, str] = {}  # the first missing (or infinite) cell of each column, for the error
    values: dict[str, set[str]] = {c: set() for c in prep.categorical_}
    moments = _Moments(len(numeric))
    kept: list[pd.DataFrame] = []
    start = 0
    for batch in rows.batches(batch_rows):
        frame = to_frame(batch, widen)
        gaps = frame.isna()
        for column in numeric:  # infinities count as missing values
            gaps[column] = gaps[column].to_numpy() | np.isinf(frame[column].to_numpy(dtype=np.float64,
                                                                                     na_value=np.nan))
        for column, count in gaps.sum().items():
            holes[column] += int(count)
            if count and column not in first:
                row = int(np.flatnonzero(gaps[column].to_numpy())[0])
                first[column] = f"{show(frame[column].iloc[row])} at row {start + row + 1}"
        for column in prep.categorical_:
            values[column].update(prep._categorical_values(frame[column]))
        if numeric:
            matrix = frame[numeric].to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
            matrix[np.isinf(matrix)] = np.nan
            moments.add(matrix)
            if sample is not None:
                lo, hi = np.searchsorted(sample, [start, start + len(frame)])
                kept.append(frame[numeric].iloc[sample[lo:hi] - start])
        start += len(frame)
    if prep.missing != "impute":
        raise_if_missing(holes, first=first)
    prep.categories_ = {c: {v: i + 1 for i, v in enumerate(sorted(values[c]))} for c in prep.categorical_}
    prep.imputed_ = {}
    if prep.missing == "impute":
        prep.imputed_ = {c: _median(path, c, batch_rows) for c in numeric if holes[c]}
    if not numeric:
        return prep
    if sample is not None:
        matrix = prep._numeric_matrix(pd.concat(kept, ignore_index=True), fit=False)  # imputed, with flags
        prep._scaler = QuantileScaler.fit(matrix, n_quantiles=min(1000, n), seed=prep.seed)
    else:
        mean, std = moments.mean_std(n, [holes[c] for c in numeric], [prep.imputed_.get(c) for c in numeric])
        prep._scaler = (mean, np.where(std > 0, std, 1.0))
    return prep


def widened_columns(rows: ParquetRows) -> dict[str, Any]:
    """The pandas dtype ``pandas.read_parquet`` gives each column of the whole table, where a batch could convert to
    another: NumPy integer and boolean columns with nulls anywhere (``float64``, ``object``; a batch without nulls
    would be ``int64``, ``bool``) and extension dtypes (``Int64``, ``boolean``: kept as the file's metadata says)."""
    import pyarrow as pa

    empty = rows.schema.empty_table().to_pandas()
    target = {c: empty[c].dtype for c in empty.columns if not isinstance(empty[c].dtype, pd.CategoricalDtype)}
    narrow = [f.name for f in rows.schema if (pa.types.is_integer(f.type) or pa.types.is_boolean(f.type))
              and isinstance(target.get(f.name), np.dtype)]
    nulls = dict.fromkeys(narrow, 0)
    for batch in ParquetRows(rows.path, columns=narrow).batches() if narrow else ():
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            nulls[name] += column.null_count
    for name in narrow:
        if nulls[name]:
            target[name] = np.dtype("float64") if target[name].kind in "iu" else np.dtype(object)
    return target


def to_frame(batch: Any, dtypes: dict[str, Any]) -> pd.DataFrame:
    """A record batch or table as pandas, with the dtypes ``pandas.read_parquet`` gives the whole table."""
    frame = batch.to_pandas()
    for column in frame.columns:
        dtype = dtypes.get(column)
        if dtype is not None and frame[column].dtype != dtype:
            frame[column] = frame[column].astype(dtype)
    return frame


def _quantile_rows(n: int, seed: int) -> np.ndarray:
    """The sorted rows the quantile scaler (seed ``seed``) fits on for an ``n``-row table."""
    rows = subsample_rows(n, seed, QUANTILE_SUBSAMPLE)
    return np.arange(n) if rows is None else np.sort(rows)


def _median(path: str | Path, column: str, batch_rows: int) -> float:
    """``np.nanmedian`` of one column (0.0 if it has no values), read one batch at a time."""
    parts = [b.column(0).to_numpy(zero_copy_only=False).astype(np.float64)
             for b in ParquetRows(path, columns=[column]).batches(batch_rows)]
    values = np.concatenate(parts) if parts else np.zeros(0)
    values[np.isinf(values)] = np.nan
    if np.isnan(values).all():
        return 0.0
    return float(np.nanmedian(values))


class _Moments:
    """Per-column count, mean and sum of squared deviations of the non-missing values, merged batch by batch."""

    def __init__(self, width: int) -> None:
        self.n = np.zeros(width)
        self.mean = np.zeros(width)
        self.m2 = np.zeros(width)

    def add(self, matrix: np.ndarray) -> None:
        present = ~np.isnan(matrix)
        n = present.sum(0).astype(np.float64)
        safe = np.where(present, matrix, 0.0)
        mean = np.divide(safe.sum(0), n, out=np.zeros_like(n), where=n > 0)
        m2 = (np.where(present, matrix - mean, 0.0) ** 2).sum(0)
        self._merge(n, mean, m2)

    def _merge(self, n: np.ndarray, mean: np.ndarray, m2: np.ndarray) -> None:
        total = self.n + n
        delta = mean - self.mean
        share = np.divide(n, total, out=np.zeros_like(total), where=total > 0)
        self.mean = self.mean + delta * share
        self.m2 = self.m2 + m2 + delta**2 * self.n * share
        self.n = total

    def mean_std(self, total: int, holes: list[int], fills: list[float | None]) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population std of the matrix the in-memory fit scales: each column with its holes filled, then
        a 0/1 was-missing column per filled column."""
        flags = [(h, f) for h, f in zip(holes, fills, strict=True) if f is not None]
        for j, (h, f) in enumerate(zip(holes, fills, strict=True)):
            if f is not None and h:
                one = np.zeros_like(self.n)
                one[j] = h
                self._merge(one, np.where(one > 0, f, 0.0), np.zeros_like(self.n))
        means = [*self.mean, *(h / total for h, _ in flags)]
        stds = [*np.sqrt(self.m2 / total), *(np.sqrt(h / total * (1 - h / total)) for h, _ in flags)]
        return np.asarray(means, dtype=np.float64), np.asarray(stds, dtype=np.float64)
