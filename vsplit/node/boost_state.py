"""What a boosting party keeps of its own data and trees, as plain arrays (``model.npz``, per-tree checkpoints).

:class:`Encoder` turns a party's table into floats (categories as indices of the training categories); the trees
become arrays (one row per split with the party owning it, one per leaf) and back; bins become their edges;
:func:`holdout_mask` draws the rows the label party holds out for early stopping.

Example:
    >>> import pandas as pd
    >>> encoder = Encoder.fit(pd.DataFrame({"age": [30, None], "job": ["a", "b"]}), categorical=("job",))
    >>> encoder.transform(pd.DataFrame({"age": [41.0], "job": ["z"]})).tolist()
    [[41.0, -1.0]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Encoder:
    """A party's table as floats: numeric columns as they are, a category as its index among the training
    categories (one never seen: -1, which the bins put with the rare categories), a missing value as NaN."""

    columns: tuple[str, ...]
    categories: dict[str, tuple[str, ...]]

    @classmethod
    def fit(cls, table: pd.DataFrame, *, categorical: Sequence[str] | None = None) -> Encoder:
        """The encoder of ``table``'s columns (``categorical``: default, the columns that are not numbers)."""
        named = set(categorical or ())
        cats = {}
        for column in table.columns:
            values = table[column]
            if column in named or not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
                cats[str(column)] = tuple(sorted({str(v) for v in values.dropna()}))
        return cls(columns=tuple(str(c) for c in table.columns), categories=cats)

    @property
    def categorical(self) -> tuple[int, ...]:
        """Positions of the categorical columns."""
        return tuple(i for i, c in enumerate(self.columns) if c in self.categories)

    def transform(self, table: pd.DataFrame) -> np.ndarray:
        """float64 ``(rows, columns)`` of ``table``'s columns."""
        out = np.empty((len(table), len(self.columns)))
        for i, column in enumerate(self.columns):  # a loop over columns
            values = table[column]
            if column in self.categories:
                index = {v: k for k, v in enumerate(self.categories[column])}
                out[:, i] = [np.nan if pd.isna(v) else index.get(str(v), -1) for v in values]
            else:
                out[:, i] = pd.to_numeric(values, errors="raise").astype(float)
        return out

    def state(self) -> dict[str, Any]:
        """As saved in ``model.npz``."""
        return {"columns": list(self.columns), "categories": {k: list(v) for k, v in self.categories.items()}}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Encoder:
        """Back from :meth:`state`."""
        return cls(columns=tuple(state["columns"]), categories={k: tuple(v) for k, v in state["categories"].items()})


def holdout_mask(rows: int, *, fraction: float, seed: int) -> np.ndarray:
    """uint8 per aligned row: 1 for the rows the label party holds out for early stopping (``train.seed``).

    Example:
        >>> int(holdout_mask(100, fraction=0.1, seed=0).sum())
        10
    """
    mask = np.zeros(rows, dtype=np.uint8)
    mask[np.random.default_rng([seed, 46]).permutation(rows)[: max(1, round(rows * fraction))]] = 1
    return mask


def trees_state(trees: Sequence[Any]) -> dict[str, np.ndarray]:
    """Trees as arrays: one row per split (tree, node, party, column, bin, missing_left, record), per leaf (with its
    integer gradient and hessian sums, ``leaf_sums``, where every tree keeps them)."""
    splits = [(t, n, s.party, s.column, s.bin, int(s.missing_left), s.record)
              for t, tree in enumerate(trees) for n, s in sorted(tree.splits.items())]
    leaves = [(t, n, v) for t, tree in enumerate(trees) for n, v in sorted(tree.leaves.items())]
    kept = all(tree.sums.keys() == tree.leaves.keys() for tree in trees)
    sums = [trees[t].sums[n] for t, n, _ in leaves] if kept else []
    return {"splits": np.array(splits, dtype=np.int64).reshape(-1, 7),
            "leaf_nodes": np.array([(t, n) for t, n, _ in leaves], dtype=np.int64).reshape(-1, 2),
            "leaf_values": np.array([v for _, _, v in leaves], dtype=np.float64), "n_trees": len(trees),
            "leaf_sums": np.array(sums, dtype=np.int64).reshape(-1, 2)}


def trees_from(state: Mapping[str, Any]) -> list[Any]:
    from vsplit.boosting import Split, Tree

    n = int(state["n_trees"])
    splits: list[dict[int, Any]] = [{} for _ in range(n)]
    leaves: list[dict[int, float]] = [{} for _ in range(n)]
    for t, node, party, column, bin_, missing, record in np.asarray(state["splits"]).reshape(-1, 7).tolist():
        splits[t][node] = Split(party=party, column=column, bin=bin_, missing_left=bool(missing), record=record)
    nodes = np.asarray(state["leaf_nodes"]).reshape(-1, 2).tolist()
    for (t, node), value in zip(nodes, np.asarray(state["leaf_values"]).tolist(), strict=True):
        leaves[t][node] = float(value)
    sums: list[dict[int, tuple[int, int]]] = [{} for _ in range(n)]
    kept = np.asarray(state.get("leaf_sums", np.zeros((0, 2))), dtype=np.int64).reshape(-1, 2).tolist()
    if len(kept) == len(nodes):  # absent from a model saved before the sums were kept
        for (t, node), (g, h) in zip(nodes, kept, strict=True):
            sums[t][node] = (g, h)
    return [Tree(splits=s, leaves=v, sums=k) for s, v, k in zip(splits, leaves, sums, strict=True)]


def bins_state(bins: Any) -> dict[str, Any]:
    """A party's :class:`~vsplit.boosting.Bins` as checkpoint arrays (its renumbering too, if the trees made one)."""
    state = {"kinds": list(bins.kinds), "cuts": [np.asarray(c, dtype=np.float64) for c in bins.cuts],
             "max_bins": bins.max_bins}
    return state if bins.ranks is None else {**state, "ranks": np.asarray(bins.ranks, dtype=np.int32)}


def bins_from(state: Mapping[str, Any]) -> Any:
    """The :class:`~vsplit.boosting.Bins` :func:`bins_state` saved.

    >>> from vsplit.boosting import fit_bins
    >>> bins = fit_bins(np.array([[1.0], [2.0]]), categorical=(0,), max_bins=3).ranked(np.array([[1, 0, 2, 3]]))
    >>> bins_from(bins_state(bins)).ranks.tolist()
    [[1, 0, 2, 3]]
    """
    from vsplit.boosting import Bins

    ranks = state.get("ranks")
    return Bins(kinds=tuple(state["kinds"]), cuts=tuple(np.asarray(c, dtype=np.float64) for c in state["cuts"]),
                max_bins=int(state["max_bins"])).ranked(None if ranks is None else np.asarray(ranks))
