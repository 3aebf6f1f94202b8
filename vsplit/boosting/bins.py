"""Each party bins its own columns on its own rows; the edges never leave it.

A numeric column gets at most ``max_bins`` quantile bins (edges: the distinct quantiles of its non-missing values;
code ``k`` holds ``edges[k-1] < x <= edges[k]``, so ``code <= t`` means ``x <= edges[t]``). A categorical column gets
one bin per category, the most frequent ``max_bins - 1`` kept (ties by value) and the rest, with categories never
seen, in one last bin. A missing value (NaN) gets a code of its own, ``max_bins``, in every column, so every column
has ``width = max_bins + 1`` codes and a peer learns nothing from the number of bins.

Example:
    >>> import numpy as np
    >>> table = np.array([[1.0, 7.0], [2.0, 7.0], [3.0, 9.0], [np.nan, 8.0]])
    >>> bins = fit_bins(table, categorical=(1,), max_bins=2)
    >>> bins.transform(table).tolist()
    [[0, 0], [0, 0], [1, 1], [2, 1]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ConfigError, DataError


@dataclass(frozen=True)
class Bins:
    """A party's private binning: per column, numeric edges or kept categories (``kinds``: "numeric"/"category")."""

    kinds: tuple[str, ...]
    cuts: tuple[np.ndarray, ...]
    max_bins: int
    #: int ``(columns, width)``: each code's final code, where the first tree ordered the categories
    #: (``BoostParams.order_categories``); ``None``: the codes as binned
    ranks: np.ndarray | None = None

    @property
    def width(self) -> int:
        """Codes per column: ``max_bins`` value bins and the missing code."""
        return self.max_bins + 1

    @property
    def categorical(self) -> tuple[int, ...]:
        """The indices of the categorical columns."""
        return tuple(c for c, kind in enumerate(self.kinds) if kind == "category")

    def ranked(self, ranks: np.ndarray | None) -> Bins:
        """These bins with each code renumbered by ``ranks`` (``(columns, width)``, see :func:`full_ranks`) after
        binning; ``None``: unchanged.

        >>> import numpy as np
        >>> bins = fit_bins(np.array([[1.0], [2.0], [3.0]]), categorical=(0,), max_bins=3)
        >>> bins.ranked(np.array([[2, 0, 1, 3]])).transform(np.array([[1.0], [2.0], [np.nan]])).ravel().tolist()
        [2, 0, 3]
        """
        if ranks is None:
            return self
        ranks = np.asarray(ranks, dtype=np.int32)
        if ranks.shape != (len(self.kinds), self.width):
            raise DataError(f"boosting bins: ranks of shape {ranks.shape}; these bins have {len(self.kinds)} columns "
                            f"of {self.width} codes")
        return dataclasses.replace(self, ranks=ranks)

    def transform(self, table: np.ndarray) -> np.ndarray:
        """int32 codes ``(rows, columns)`` of a table with this party's columns (NaN: missing).

        Raises:
            DataError: the table has another number of columns.
        """
        table = np.asarray(table, dtype=np.float64)
        if table.ndim != 2 or table.shape[1] != len(self.kinds):
            raise DataError(f"boosting bins: a table of shape {table.shape}; these bins have {len(self.kinds)} "
                            "columns")
        codes = np.empty(table.shape, dtype=np.int32)
        for c, (kind, cut) in enumerate(zip(self.kinds, self.cuts, strict=True)):  # a loop over columns
            x = table[:, c]
            if kind == "numeric":
                code = np.searchsorted(cut, x, side="left")
            else:
                at = np.searchsorted(cut, x).clip(0, max(len(cut) - 1, 0))
                known = (cut[at] == x) if len(cut) else np.zeros(len(x), dtype=bool)
                code = np.where(known, at, len(cut))
            codes[:, c] = np.where(np.isnan(x), self.max_bins, code)
        return rank_codes(codes, self.ranks)


def full_ranks(columns: int, width: int, ordered: dict[int, np.ndarray]) -> np.ndarray:
    """The ``(columns, width)`` renumbering of a party's codes: ``ordered[c]`` for an ordered column ``c``, the
    identity elsewhere.

    >>> full_ranks(2, 3, {1: np.array([1, 0, 2])}).tolist()
    [[0, 1, 2], [1, 0, 2]]
    """
    out = np.tile(np.arange(width, dtype=np.int32), (columns, 1))
    for column, ranks in ordered.items():
        out[column] = ranks
    return out


def rank_codes(codes: np.ndarray, ranks: np.ndarray | None) -> np.ndarray:
    """``codes`` ``(rows, columns)`` renumbered by ``ranks`` (``(columns, width)``; ``None``: unchanged).

    >>> rank_codes(np.array([[0, 2], [1, 0]]), np.array([[1, 0, 2], [2, 1, 0]])).tolist()
    [[1, 0], [0, 2]]
    """
    if ranks is None:
        return codes
    return ranks[np.arange(codes.shape[1]), codes].astype(codes.dtype, copy=False)


def fit_bins(table: np.ndarray, *, categorical: Sequence[int] = (), max_bins: int = 32) -> Bins:
    """Bin a party's own columns on its own rows (a table of floats; NaN is missing; categories as numbers).

    Raises:
        ConfigError: ``max_bins`` outside 2..255, or a categorical index out of range.
        DataError: the table is not 2-D or holds an infinity.
    """
    if not 2 <= max_bins <= 255:
        raise ConfigError(f"boosting: max_bins = {max_bins}; use 2..255 (32 is usual)")
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2:
        raise DataError(f"boosting bins: a table of shape {table.shape}; expected (rows, columns)")
    if np.isinf(table).any():
        raise DataError("boosting bins: an infinite value; clip it or make it missing (NaN)")
    if any(not 0 <= c < table.shape[1] for c in categorical):
        raise ConfigError(f"boosting: categorical columns {tuple(categorical)} out of range 0..{table.shape[1] - 1}")
    kinds, cuts = [], []
    for c in range(table.shape[1]):  # a loop over columns
        x = table[:, c]
        x = x[~np.isnan(x)]
        if c in categorical:
            values, counts = np.unique(x, return_counts=True)
            order = np.lexsort((values, -counts))[: max_bins - 1]
            kinds.append("category")
            cuts.append(np.sort(values[order]))
        else:
            edges = np.unique(np.quantile(x, np.arange(1, max_bins) / max_bins)) if len(x) else np.empty(0)
            kinds.append("numeric")
            cuts.append(edges[: max_bins - 1])
    return Bins(kinds=tuple(kinds), cuts=tuple(cuts), max_bins=max_bins)
