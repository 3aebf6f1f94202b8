"""The bank's columns of a few validated rows to model inputs, without a DataFrame: the serving fast path.

:meth:`TablePreprocessor.transform <vsplit.data.preprocess.TablePreprocessor.transform>` builds and checks a pandas
table, which costs milliseconds for one row. A served row has already been checked (:mod:`vsplit.serve.requests`:
every column present, numbers finite, no nulls), so :class:`RowEncoder` does only the arithmetic, the same
arithmetic: category codes by the fitted mapping of each value's text, numeric columns through the fitted scaler's
own transform (scikit-learn's ``QuantileTransformer._transform``, the step its ``transform`` runs after checking its
input). Models trained with ``data.missing = "impute"`` take the table path (:meth:`RowEncoder.supports`).
``tests/test_serving.py`` checks both paths give the same scores as batch prediction.

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

    @staticmethod
    def supports(prep: Any) -> bool:
        """Whether rows of ``prep``'s columns can skip the table (no imputation, a known scaler)."""
        if prep is None or prep.missing != "error":
            return False
        return prep.scaling == "standard" or hasattr(prep._scaler, "_transform")

    def encode(self, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Any]:
        """``(cat, num)`` tensors of ``rows``, equal to ``prep.transform`` of the same rows as a table."""
        import torch

        n = len(rows)
        codes = np.zeros((n, len(self.categorical)), dtype=np.int64)
        for j, (column, mapping) in enumerate(zip(self.categorical, self.mappings, strict=True)):
            codes[:, j] = [mapping.get(str(r[column]), 0) for r in rows]
        numeric = np.array([[r[c] for c in self.numeric] for r in rows], dtype=np.float64).reshape(n, -1)
        if numeric.shape[1]:
            if self.prep.scaling == "quantile":
                numeric = self.scaler._transform(numeric, inverse=False)
            else:
                mean, std = self.scaler
                numeric = (numeric - mean) / std
        return torch.from_numpy(codes), torch.from_numpy(np.ascontiguousarray(numeric, dtype=np.float32))
