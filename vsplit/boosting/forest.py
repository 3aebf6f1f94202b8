"""The label party's trees as flat arrays, walked for a few rows at once: the serving path of a boosted model.

Theory of operation. :meth:`~vsplit.boosting.trees.BoostModel.margins` walks tree by tree, level by level and split
by split, a numpy call per split: right for a table of thousands of rows, but a single applicant through 50 trees of
depth 5 costs thousands of calls. :class:`Forest` lays every tree out as arrays indexed ``(tree, node)`` (heap
numbering, as the trees are): which bit decides a split node, and each leaf's value. A row's bits are its own splits'
(from its codes, all at once) then each partner's decisions (the one prediction round's answer), side by side; the
walk takes ``max_depth`` vectorised steps over every tree at once, and the leaves are added tree by tree in order,
so the margins are bit for bit those of :meth:`BoostModel.margins`.

Example:
    >>> from vsplit.boosting.trees import BoostModel, Split, Tree
    >>> tree = Tree(splits={0: Split(party=0, column=0, bin=1, missing_left=False),
    ...                     2: Split(party=1, column=0, bin=0, missing_left=True, record=0)},
    ...             leaves={1: -0.5, 5: 0.25, 6: 0.75})
    >>> model = BoostModel(trees=(tree,), base=0.1, widths=(4, 3))
    >>> own, bits = np.array([[0], [2], [3]]), {1: np.array([[1], [0], [0]], np.uint8)}
    >>> Forest.of(model).margins(own_codes=own, decisions=bits).tolist() == model.margins(
    ...     own_codes=own, decisions=bits).tolist()
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from vsplit.boosting.trees import BoostModel


@dataclass(frozen=True)
class Forest:
    """Flat trees: per ``(tree, node)`` the bit deciding it (-1: a leaf or no node) and its leaf value; the label
    party's splits as columns, bins and missing directions; each partner's record count."""

    base: float
    width: int
    bit: np.ndarray
    leaf: np.ndarray
    own_columns: np.ndarray
    own_bins: np.ndarray
    own_missing_left: np.ndarray
    records: tuple[int, ...]
    depth: int

    @classmethod
    def of(cls, model: BoostModel, *, partners: int | None = None) -> Forest:
        """``model`` laid out flat; ``partners``: how many partners (default: the model's ``widths`` less one)."""
        partners = len(model.widths) - 1 if partners is None else partners
        depth = max((t.depth for t in model.trees), default=0)
        nodes = 2 ** (depth + 1) - 1
        bit = np.full((len(model.trees), nodes), -1, dtype=np.int64)
        leaf = np.zeros((len(model.trees), nodes))
        own: list[tuple[int, int, bool]] = []
        records = [0] * partners
        for t, tree in enumerate(model.trees):  # a loop over trees and their splits, at load time only
            for node, split in tree.splits.items():
                if split.party == 0:
                    bit[t, node] = len(own)
                    own.append((split.column, split.bin, split.missing_left))
                else:
                    records[split.party - 1] += 1  # as LabelPredict counts them: ids 0..n-1
            for node, value in tree.leaves.items():
                leaf[t, node] = value
        offsets = np.cumsum([len(own), *records])
        for t, tree in enumerate(model.trees):
            for node, split in tree.splits.items():
                if split.party:
                    bit[t, node] = offsets[split.party - 1] + split.record
        columns, bins, missing = (np.array(v, dtype=dtype).reshape(-1) for v, dtype in
                                  zip(zip(*own, strict=True) if own else ((), (), ()), (np.int64, np.int64, bool),
                                      strict=True))
        return cls(base=float(model.base), width=int(model.widths[0]), bit=bit, leaf=leaf, own_columns=columns,
                   own_bins=bins, own_missing_left=missing, records=tuple(records), depth=depth)

    def bits(self, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray]) -> np.ndarray:
        """uint8 ``(rows, splits)``: the label party's split bits from its codes, then each partner's decisions."""
        codes = np.asarray(own_codes)[:, self.own_columns]
        own = np.where(codes == self.width - 1, self.own_missing_left, codes <= self.own_bins).astype(np.uint8)
        parts = [own, *(np.asarray(decisions[k + 1], dtype=np.uint8).reshape(len(codes), n)
                        for k, n in enumerate(self.records))]
        return np.concatenate(parts, axis=1)

    def leaves(self, bits: np.ndarray) -> np.ndarray:
        """Each row's leaf in every tree, ``(rows, trees)``, from its bits."""
        rows = len(bits)
        trees = np.arange(self.bit.shape[0])
        node = np.zeros((rows, len(trees)), dtype=np.int64)
        lookup = np.concatenate([bits, np.zeros((rows, 1), np.uint8)], axis=1)  # column -1: a leaf's, unused
        for _ in range(self.depth):  # a loop over levels: every row and tree moves at once
            at = self.bit[trees, node]
            left = lookup[np.arange(rows)[:, None], at].astype(bool)
            node = np.where(at >= 0, 2 * node + np.where(left, 1, 2), node)
        return node

    def margins(self, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray]) -> np.ndarray:
        """Log-odds per row, equal bit for bit to :meth:`BoostModel.margins`."""
        node = self.leaves(self.bits(own_codes=own_codes, decisions=decisions))
        values = self.leaf[np.arange(self.leaf.shape[0]), node]  # (rows, trees)
        out = np.full(len(node), self.base)
        for t in range(values.shape[1]):  # tree by tree, in order: the same sums as BoostModel.margins
            out += values[:, t]
        return out

    def predict_proba(self, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray]) -> np.ndarray:
        """Probability of the positive class per row."""
        return 1.0 / (1.0 + np.exp(-self.margins(own_codes=own_codes, decisions=decisions)))
