"""Quantile scaling of numeric columns to a normal distribution: scikit-learn's ``QuantileTransformer``, bit for bit.

Every party process scales its numeric columns this way, and importing scikit-learn (with SciPy's statistics) costs
a process about a second of CPU before it does any work: as much as PyTorch. So the arithmetic is here, step by
step as scikit-learn 1.x does it, with nothing imported but NumPy and SciPy's ``ndtri`` (what
``scipy.stats.norm.ppf`` computes inside (0, 1)):

- fit: ``n_quantiles`` reference levels ``linspace(0, 1, n)``; at most ``subsample`` rows, drawn as
  ``sklearn.utils.resample(replace=False, random_state=seed)`` draws them (:func:`subsample_rows`); the column-wise
  ``nanpercentile`` of those rows at the levels.
- transform (:class:`QuantileArithmetic`): each value's level by interpolating forward and backward and averaging;
  values beyond the fitted range at levels 0 and 1; ``ndtri`` of the level, clipped as scikit-learn clips.

``tests/test_quantile.py`` checks fit and transform equal scikit-learn's exactly, and the saved form
(``quantiles_``, ``references_``) is the one models have always stored.

Example:
    >>> x = np.random.default_rng(0).normal(size=(500, 2))
    >>> scaler = QuantileScaler.fit(x, n_quantiles=100, seed=0)
    >>> scaler.quantiles_.shape, scaler.transform(x[:3]).shape
    ((100, 2), (3, 2))
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: scikit-learn's ``BOUNDS_THRESHOLD``: values within it of the fitted range's ends map to the end levels
BOUNDS_THRESHOLD = 1e-7
#: the rows a fit uses at most (scikit-learn's ``subsample`` default)
SUBSAMPLE = 10_000


def subsample_rows(n: int, seed: int, subsample: int = SUBSAMPLE) -> np.ndarray | None:
    """The rows (in draw order) a fit on ``n`` rows uses, as ``sklearn.utils.resample(replace=False)`` with
    ``random_state=seed`` draws them; ``None`` when every row is used.

    >>> subsample_rows(5, seed=0) is None, len(subsample_rows(20_000, seed=0))
    (True, 10000)
    """
    if n <= subsample:
        return None
    rows = np.arange(n)
    np.random.RandomState(seed).shuffle(rows)
    return rows[:subsample]


class QuantileScaler:
    """A fitted quantile scaler: ``quantiles_`` (levels x columns) at the levels ``references_``."""

    output_distribution = "normal"

    def __init__(self, quantiles: np.ndarray, references: np.ndarray) -> None:
        self.quantiles_ = np.asarray(quantiles, dtype=np.float64)
        self.references_ = np.asarray(references, dtype=np.float64)
        self._arithmetic: QuantileArithmetic | None = None

    @classmethod
    def fit(cls, matrix: np.ndarray, *, n_quantiles: int = 1000, seed: int = 0,
            subsample: int = SUBSAMPLE) -> QuantileScaler:
        """Fit on ``matrix`` (rows x columns; NaN ignored) as ``QuantileTransformer(n_quantiles,
        random_state=seed).fit`` does."""
        x = np.asarray(matrix)
        if x.dtype not in (np.float32, np.float64):
            x = x.astype(np.float64)
        references = np.linspace(0, 1, max(1, min(n_quantiles, x.shape[0])), endpoint=True)
        if (rows := subsample_rows(x.shape[0], seed, subsample)) is not None:
            x = x[rows]
        return cls(np.nanpercentile(x, references * 100, axis=0), references)

    def transform(self, matrix: np.ndarray) -> np.ndarray:
        """The scaled ``matrix`` (float64; NaN stays NaN)."""
        if self._arithmetic is None:
            self._arithmetic = QuantileArithmetic(self)
        return self._arithmetic(np.asarray(matrix, dtype=np.float64))


class QuantileArithmetic:
    """The forward transform of a fitted quantile scaler (ours or scikit-learn's ``QuantileTransformer``, normal or
    uniform output): the arithmetic of scikit-learn's ``_transform_col`` with the per-column constants computed once.

    Example:
        >>> x = np.random.default_rng(0).normal(size=(200, 2))
        >>> scaler = QuantileScaler.fit(x, n_quantiles=50)
        >>> QuantileArithmetic(scaler)(x[:2]).shape
        (2, 2)
    """

    def __init__(self, scaler: Any) -> None:
        from scipy.special import ndtri

        self.ndtri = ndtri
        self.normal = scaler.output_distribution == "normal"
        references = np.asarray(scaler.references_, dtype=np.float64)
        self.columns = [(q, -q[::-1], references, -references[::-1], q[0], q[-1])
                        for q in np.asarray(scaler.quantiles_, dtype=np.float64).T]
        bound = BOUNDS_THRESHOLD - np.spacing(1)
        self.clip = (ndtri(bound), ndtri(1 - bound))

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """The transform of ``values`` (rows x columns)."""
        out = np.empty(values.shape, dtype=np.float64)
        for j, (q, q_back, ref, ref_back, first, last) in enumerate(self.columns):
            x = values[:, j]
            with np.errstate(invalid="ignore"):  # NaN compares False
                if self.normal:
                    low, high = x - BOUNDS_THRESHOLD < first, x + BOUNDS_THRESHOLD > last
                else:
                    low, high = x == first, x == last
            y = 0.5 * (np.interp(x, q, ref) - np.interp(-x, q_back, ref_back))
            y[np.isnan(x)] = np.nan  # np.interp on one quantile answers it for NaN too
            y[high] = 1.0
            y[low] = 0.0
            if self.normal:  # norm.ppf is ndtri on [0, 1] (-inf at 0, inf at 1); clipped as scikit-learn clips
                y = self.ndtri(y)
                np.maximum(y, self.clip[0], out=y)
                np.minimum(y, self.clip[1], out=y)
            out[:, j] = y
        return out
