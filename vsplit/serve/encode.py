"""The bank's columns of a few validated rows to model inputs, without a DataFrame: the serving fast path.

:meth:`TablePreprocessor.transform <vsplit.data.preprocess.TablePreprocessor.transform>` builds and checks a pandas
table, which costs milliseconds for one row. A served row has already been checked (:mod:`vsplit.serve.requests`:
every column present, numbers finite, no nulls), so :class:`RowEncoder` does only the arithmetic, the same
arithmetic: category codes by the fitted mapping of each value's text, numeric columns through the fitted quantile
scaler's arithmetic (:class:`~vsplit.data.quantile.QuantileArithmetic`: scikit-learn's ``_transform_col`` step by
step, without the per-call argument checks of ``scipy.stats.norm.ppf``, which cost more than the rest of a row's
scoring).
Models trained with ``data.missing = "impute"`` take the table path (:meth:`RowEncoder.supports`).
``tests/test_serving.py`` checks both paths give the same scores as batch prediction, and the quantile arithmetic
equals scikit-learn's bit for bit.

Example:
    >>> import pandas as pd
    >>> from vsplit.data.preprocess import TablePreprocessor
    >>> prep = TablePreprocessor().fit(pd.DataFrame({"job": ["a", "b", "a"], "x": [1.0, 2.0, 5.0]}))
    >>> cat, num = RowEncoder(prep).encode([{"job": "b", "x": 2.0}])
    >>> table = prep.transform(pd.DataFrame({"job": ["b"], "x": [2.0]}))
    >>> bool((cat == table[0]).all() and (num == table[1]).all())
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vsplit.data.quantile import QuantileArithmetic


class RowEncoder:
    """Encodes validated rows (column -> value) as ``prep`` transforms a table of them."""

    def __init__(self, prep: Any) -> None:
        self.prep = prep
        self.categorical = list(prep.categorical_)
        self.numeric = list(prep.numeric_)
        self.mappings = [prep.categories_[c] for c in self.categorical]
        self.scaler = prep._scaler
        self.quantile = QuantileArithmetic(prep._scaler) if prep.scaling == "quantile" else None

    @staticmethod
    def supports(prep: Any) -> bool:
        """Whether rows of ``prep``'s columns can skip the table (no imputation, a known scaler)."""
        if prep is None or prep.missing != "error":
            return False
        scaler = prep._scaler
        return prep.scaling == "standard" or (hasattr(scaler, "quantiles_") and hasattr(scaler, "references_")
                                              and scaler.output_distribution in ("normal", "uniform"))

    def encode(self, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Any]:
        """``(cat, num)`` tensors of ``rows``, equal to ``prep.transform`` of the same rows as a table."""
        import torch

        codes, numeric = self.arrays(rows)
        return torch.from_numpy(codes), torch.from_numpy(numeric)

    def arrays(self, rows: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode` as numpy arrays: int64 codes and float32 numeric columns."""
        n = len(rows)
        codes = np.zeros((n, len(self.categorical)), dtype=np.int64)
        for j, (column, mapping) in enumerate(zip(self.categorical, self.mappings, strict=True)):
            codes[:, j] = [mapping.get(str(r[column]), 0) for r in rows]
        numeric = np.array([[r[c] for c in self.numeric] for r in rows], dtype=np.float64).reshape(n, -1)
        if numeric.shape[1]:
            if self.quantile is not None:
                numeric = self.quantile(numeric)
            else:
                mean, std = self.scaler
                numeric = (numeric - mean) / std
        return codes, np.ascontiguousarray(numeric, dtype=np.float32)
