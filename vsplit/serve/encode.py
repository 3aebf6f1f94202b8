"""The bank's columns of a few validated rows to model inputs, without a DataFrame: the serving fast path.

:meth:`TablePreprocessor.transform <vsplit.data.preprocess.TablePreprocessor.transform>` builds and checks a pandas
table, which costs milliseconds for one row. A served row has already been checked (:mod:`vsplit.serve.requests`:
every column present, numbers finite, no nulls), so :class:`RowEncoder` does only the arithmetic, the same
arithmetic: category codes by the fitted mapping of each value's text, numeric columns through the fitted quantile
scaler's arithmetic (:func:`quantile_transform`: scikit-learn's ``QuantileTransformer._transform_col`` step by step,
without the per-call argument checks of ``scipy.stats.norm.ppf``, which cost more than the rest of a row's scoring).
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


class QuantileArithmetic:
    """A fitted :class:`sklearn.preprocessing.QuantileTransformer`'s forward transform of finite values: the
    arithmetic of its ``_transform_col``, with ``ndtri`` (what ``scipy.stats.norm.ppf`` computes inside (0, 1))
    called directly and the per-column constants computed once.

    Example:
        >>> from sklearn.preprocessing import QuantileTransformer
        >>> x = np.random.default_rng(0).normal(size=(200, 2))
        >>> scaler = QuantileTransformer(n_quantiles=50, output_distribution="normal").fit(x)
        >>> bool((QuantileArithmetic(scaler)(x[:5]) == scaler.transform(x[:5])).all())
        True
    """

    def __init__(self, scaler: Any) -> None:
        from scipy.special import ndtri
        from sklearn.preprocessing._data import BOUNDS_THRESHOLD

        self.ndtri, self.threshold = ndtri, BOUNDS_THRESHOLD
        self.normal = scaler.output_distribution == "normal"
        references = np.asarray(scaler.references_, dtype=np.float64)
        self.columns = [(q, -q[::-1], references, -references[::-1], q[0], q[-1])
                        for q in np.asarray(scaler.quantiles_, dtype=np.float64).T]
        bound = BOUNDS_THRESHOLD - np.spacing(1)
        self.clip = (ndtri(bound), ndtri(1 - bound))

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """The transform of ``values`` (rows x columns, finite)."""
        out = np.empty(values.shape, dtype=np.float64)
        for j, (q, q_back, ref, ref_back, first, last) in enumerate(self.columns):
            x = values[:, j]
            if self.normal:
                low, high = x - self.threshold < first, x + self.threshold > last
            else:
                low, high = x == first, x == last
            y = 0.5 * (np.interp(x, q, ref) - np.interp(-x, q_back, ref_back))
            y[high] = 1.0
            y[low] = 0.0
            if self.normal:  # norm.ppf is ndtri on [0, 1] (-inf at 0, inf at 1); clipped as scikit-learn clips
                y = self.ndtri(y)
                np.maximum(y, self.clip[0], out=y)
                np.minimum(y, self.clip[1], out=y)
            out[:, j] = y
        return out
