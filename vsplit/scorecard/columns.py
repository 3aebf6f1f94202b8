"""A party's WOE inputs: each attribute's coarse bin per row, and each bin's WOE value (and label).

A party's binning (:mod:`vsplit.woe`, or any WOE map) gives, per attribute, a code per row in ``0..bins-1`` and a
WOE value per bin. The WOE matrix (rows x attributes) is ``woe[j][codes[:, j]]``; a partner's gradient is a sum over
its bins, which is why the machines take codes and WOE tables rather than the matrix.

Example:
    >>> import numpy as np
    >>> cols = WoeColumns(names=("age",), woe=(np.array([-0.4, 0.3]),), codes=np.array([[0], [1], [1]]))
    >>> cols.matrix().ravel().tolist()
    [-0.4, 0.3, 0.3]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.errors import DataError
from vsplit.scorecard.params import MAX_ABS_WOE


@dataclass(frozen=True, eq=False)
class WoeColumns:
    """One party's selected attributes: ``names``, per attribute its WOE per bin, and ``codes`` (rows x attributes).

    ``labels``: per attribute a readable label per bin (e.g. ``"[30, 40)"``, ``"missing"``); default ``"bin k"``.

    Raises:
        DataError: shapes that do not match, a code outside its attribute's bins, or a WOE value not finite or
            beyond +-20 (a bin with almost no events or non-events: merge it with a neighbour).
    """

    names: tuple[str, ...]
    woe: tuple[np.ndarray, ...]
    codes: np.ndarray
    labels: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes)
        object.__setattr__(self, "codes", codes.astype(np.int64))
        object.__setattr__(self, "woe", tuple(np.asarray(w, dtype=np.float64) for w in self.woe))
        if not self.labels:
            object.__setattr__(self, "labels", tuple(tuple(f"bin {k}" for k in range(len(w))) for w in self.woe))
        if codes.ndim != 2 or codes.shape[1] != len(self.names) or len(self.woe) != len(self.names) \
                or len(self.labels) != len(self.names):
            raise DataError(f"scorecard: codes of shape {codes.shape} for {len(self.names)} attributes and "
                            f"{len(self.woe)} WOE tables")
        for j, (name, table) in enumerate(zip(self.names, self.woe, strict=True)):
            if not len(table) or table.ndim != 1 or len(self.labels[j]) != len(table):
                raise DataError(f"scorecard: attribute {name!r} has no WOE table or its labels do not match it")
            if not (np.isfinite(table).all() and np.abs(table).max() <= MAX_ABS_WOE):
                raise DataError(f"scorecard: attribute {name!r} has a WOE value not finite or beyond "
                                f"+-{MAX_ABS_WOE:g}; merge its bin with a neighbour")
            if codes.size and (codes[:, j].min() < 0 or codes[:, j].max() >= len(table)):
                raise DataError(f"scorecard: attribute {name!r} has a bin code outside 0..{len(table) - 1}")

    @property
    def rows(self) -> int:
        return int(self.codes.shape[0])

    def matrix(self) -> np.ndarray:
        """The WOE matrix, float64 ``(rows, attributes)``."""
        out = np.empty(self.codes.shape, dtype=np.float64)
        for j, table in enumerate(self.woe):  # a loop over attributes
            out[:, j] = table[self.codes[:, j]]
        return out

    def with_codes(self, codes: np.ndarray) -> WoeColumns:
        """The same attributes and tables over other rows (e.g. the test rows)."""
        return WoeColumns(names=self.names, woe=self.woe, codes=codes, labels=self.labels)

    def select(self, names: Sequence[str]) -> WoeColumns:
        """Only the attributes ``names`` (in that order)."""
        index = [self.names.index(n) for n in names]
        return WoeColumns(names=tuple(names), woe=tuple(self.woe[j] for j in index), codes=self.codes[:, index],
                          labels=tuple(self.labels[j] for j in index))


def columns_from_maps(maps: Sequence[Any], table: Any) -> WoeColumns:
    """A party's :class:`WoeColumns` of ``table`` from its WOE maps (:class:`vsplit.woe.WoeMap`: ``name``, ``woe``,
    ``coarse(values)``, ``coarse_labels()``, ``fine.kind``). A categorical attribute gains a last bin, "unseen
    category", of WOE 0 (no evidence either way, as the map itself scores it) for values never seen when binning.

    Example:
        >>> import pandas as pd
        >>> from vsplit.woe import WoeMap, fit_fine_bins
        >>> table = pd.DataFrame({"job": ["a", "b", "a", "b"]})
        >>> fine = fit_fine_bins(table, categorical=("job",), max_bins=4)[0]
        >>> m = WoeMap(fine=fine, coarse_of_fine=np.array([0, 1, 2]), woe=np.array([0.5, -0.5, 0.0]))
        >>> cols = columns_from_maps([m], pd.DataFrame({"job": ["b", "z"]}))
        >>> cols.codes.ravel().tolist(), cols.labels[0][-1]
        ([1, 3], 'unseen category')
    """
    names, tables, labels = map_tables(maps)
    codes = []
    for m, woe in zip(maps, tables, strict=True):  # a loop over attributes
        coarse = np.asarray(m.coarse(table[m.name]), dtype=np.int64)
        codes.append(np.where(coarse < 0, len(woe) - 1, coarse))
    matrix = np.column_stack(codes) if codes else np.zeros((len(table), 0), dtype=np.int64)
    return WoeColumns(names=names, woe=tables, codes=matrix, labels=labels)


def map_tables(maps: Sequence[Any]) -> tuple[tuple[str, ...], tuple[np.ndarray, ...], tuple[tuple[str, ...], ...]]:
    """Names, WOE per bin and bin labels of WOE maps, as :func:`columns_from_maps` numbers the bins."""
    names, tables, labels = [], [], []
    for m in maps:  # a loop over attributes
        woe, labs = np.asarray(m.woe, dtype=np.float64), list(m.coarse_labels())
        if getattr(m.fine, "kind", "") == "category":
            woe, labs = np.append(woe, 0.0), [*labs, "unseen category"]
        names.append(str(m.name))
        tables.append(woe)
        labels.append(tuple(labs))
    return tuple(names), tuple(tables), tuple(labels)
