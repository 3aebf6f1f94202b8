"""Boosted trees as the label party holds them, and walking them.

Nodes are numbered as a heap: the root is 0, node ``i``'s children are ``2i + 1`` (left) and ``2i + 2`` (right). A
split names the party that owns it (0: the label party; ``k``: the k-th partner), the column and threshold bin in
that party's own binning, the missing direction, and for a partner's split the opaque record id under which the
partner keeps it. To walk the trees the label party needs, per row, one bit per split: its own it computes from its
codes, a partner's come from that partner in one message (:mod:`vsplit.boosting.predict`).

Example:
    >>> import numpy as np
    >>> tree = Tree(splits={0: Split(party=0, column=0, bin=1, missing_left=False)}, leaves={1: -0.5, 2: 0.5})
    >>> model = BoostModel(trees=(tree,), base=0.0, widths=(4,))
    >>> model.margins(own_codes=np.array([[0], [2], [3]]), decisions={}).tolist()
    [-0.5, 0.5, 0.5]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from vsplit.boosting.gains import goes_left


@dataclass(frozen=True)
class Split:
    """Where a node splits: ``party``'s ``column`` at ``code <= bin``; ``record`` is a partner's id for it."""

    party: int
    column: int
    bin: int
    missing_left: bool
    record: int = -1

    def key(self) -> tuple[int, int, int, bool]:
        """What two equal trees agree on (a record id is each partner's own numbering)."""
        return (self.party, self.column, self.bin, self.missing_left)


@dataclass(frozen=True)
class Tree:
    """One tree: its splits and its leaf values (learning rate included), by node id; ``sums``: each leaf's integer
    gradient and hessian sums over its training rows (the fixed point of :func:`vsplit.boosting.gains.quantize`),
    which explanations need (empty in a model trained before they were kept)."""

    splits: dict[int, Split] = field(default_factory=dict)
    leaves: dict[int, float] = field(default_factory=dict)
    sums: dict[int, tuple[int, int]] = field(default_factory=dict)

    def node_sums(self) -> dict[int, tuple[int, int]]:
        """Every node's integer sums, a split node's being its leaves' (empty without ``sums``).

        Example:
            >>> Tree(leaves={1: -0.1, 2: 0.1}, sums={1: (5, 8), 2: (-3, 4)}).node_sums()
            {1: (5, 8), 0: (2, 12), 2: (-3, 4)}
        """
        out: dict[int, tuple[int, int]] = {}
        for leaf, (g, h) in self.sums.items():  # a loop over leaves and their ancestors
            node = leaf
            while True:
                before = out.get(node, (0, 0))
                out[node] = (before[0] + int(g), before[1] + int(h))
                if node == 0:
                    break
                node = (node - 1) // 2
        return out

    def by_level(self) -> list[list[tuple[int, Split]]]:
        """The splits level by level (the root's first), each level's by node id: a walk visits each level once.

        Example:
            >>> s = Split(party=0, column=0, bin=1, missing_left=False)
            >>> [[at for at, _ in level] for level in Tree(splits={2: s, 0: s, 1: s}).by_level()]
            [[0], [1, 2]]
        """
        levels: list[list[tuple[int, Split]]] = []
        for at in sorted(self.splits):
            level = int(at + 1).bit_length() - 1
            levels += [[] for _ in range(level + 1 - len(levels))]
            levels[level].append((at, self.splits[at]))
        return levels

    @property
    def depth(self) -> int:
        """Levels of splits (0 for a single leaf)."""
        deepest = max((*self.splits, *self.leaves), default=0)
        return int(np.floor(np.log2(deepest + 1)))


@dataclass(frozen=True)
class BoostModel:
    """The label party's model: trees, the starting margin, and each party's bins per column (``widths``)."""

    trees: tuple[Tree, ...]
    base: float
    widths: tuple[int, ...]

    def margins(self, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray]) -> np.ndarray:
        """Log-odds per row: walk every tree with the label party's codes and each partner's decision bits.

        Args:
            own_codes: the label party's bin codes, ``(rows, columns)``.
            decisions: partner index -> uint8 ``(rows, records)``: the bit "goes left" of each recorded split.
        """
        rows = len(own_codes)
        out = np.full(rows, self.base)
        for tree in self.trees:  # a loop over trees and levels, not rows
            node = np.zeros(rows, dtype=np.int64)
            for level in tree.by_level():  # a row moves one level down per level: each level's splits once
                for at, split in level:
                    here = node == at
                    if not here.any():
                        continue
                    if split.party == 0:
                        left = goes_left(own_codes[here, split.column], bin=split.bin,
                                         missing_left=split.missing_left, width=self.widths[0])
                    else:
                        left = decisions[split.party][here, split.record].astype(bool)
                    node[here] = 2 * at + np.where(left, 1, 2)
            values = np.array([tree.leaves.get(int(n), np.nan) for n in range(int(node.max()) + 1)])
            out += values[node]
        return out

    def predict_proba(self, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray]) -> np.ndarray:
        """Probability of the positive class per row."""
        return 1.0 / (1.0 + np.exp(-self.margins(own_codes=own_codes, decisions=decisions)))
