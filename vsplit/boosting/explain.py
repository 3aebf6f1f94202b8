"""Per-party contributions of a boosted model's score, from what the label party already holds (no extra traffic).

Theory of operation: path attribution (Saabas). Every node of a tree has a value, the leaf value it would have been
had the tree stopped there (``-lr * G / (H + lambda)`` of the training rows reaching it, the same fixed point and
formula as the leaves: :func:`vsplit.boosting.gains.leaf_values`). A row walks from the root to its leaf; each split
on its way moves the value from the node's to the child's, and that change is credited to the party that owns the
split (and, for the label party's own splits, to its column). Over a tree the changes telescope to ``leaf - root``,
so ``base + sum of the roots + every credit`` is the row's margin, up to float64 rounding. The label party knows the
owner of every split and, from the one prediction round, the partners' bits. The node values it computes by
replaying training (:func:`node_values`): the training rows' gradients, summed per node; only the bits of the rows
that reached a node count, which it learned while training (a partner's ``Assigned``). The notebook estimator takes
them from one prediction round on the training rows, in its one process; keeping each leaf's integer sums in the
model would give the same values with no replay.

Example:
    >>> import numpy as np
    >>> from vsplit.boosting.trees import BoostModel, Split, Tree
    >>> tree = Tree(splits={0: Split(party=1, column=0, bin=0, missing_left=False, record=0)},
    ...             leaves={1: -0.3, 2: 0.3})
    >>> model = BoostModel(trees=(tree,), base=0.0, widths=(3, 3))
    >>> values = [{0: 0.1, 1: -0.3, 2: 0.3}]
    >>> own = np.zeros((2, 1), dtype=np.int64)
    >>> bits = {1: np.array([[1], [0]], dtype=np.uint8)}
    >>> bias, columns, parties = contributions(model, values, own_codes=own, decisions=bits, partners=1)
    >>> round(bias, 6), parties.round(6).tolist()
    (0.1, [[0.0, -0.4], [0.0, 0.2]])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from vsplit.boosting.gains import BoostParams, goes_left, gradients, leaf_values, quantize
from vsplit.boosting.trees import BoostModel, Tree
from vsplit.errors import DataError


def walk(tree: Tree, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray], width: int) -> np.ndarray:
    """Each row's node at every level of ``tree``, ``(rows, depth + 1)``; a row that reached its leaf stays there.

    The same walk as :meth:`BoostModel.margins`: the label party's splits from its codes, a partner's from its bits.
    """
    rows = len(own_codes)
    node = np.zeros(rows, dtype=np.int64)
    path = [node]
    for _ in range(tree.depth):  # a loop over levels and split nodes, not rows
        after = node.copy()
        for at, split in tree.splits.items():
            here = node == at
            if not here.any():
                continue
            if split.party == 0:
                left = goes_left(own_codes[here, split.column], bin=split.bin, missing_left=split.missing_left,
                                 width=width)
            else:
                left = decisions[split.party][here, split.record].astype(bool)
            after[here] = 2 * at + np.where(left, 1, 2)
        path.append(after)
        node = after
    return np.stack(path, axis=1)


def node_values(model: BoostModel, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray],
                labels: np.ndarray, params: BoostParams) -> list[dict[int, float]]:
    """Every node's value in every tree, replaying training on its rows (the rows the model was trained on).

    Raises:
        DataError: a replayed leaf differs from the model's: these are not the rows and labels it was trained on.
    """
    labels = np.asarray(labels, dtype=np.float64)
    margin = np.full(len(labels), model.base)
    out = []
    for tree in model.trees:  # a loop over trees
        gh = quantize(*gradients(margin, labels), scale=params.scale).astype(np.float64)
        path = walk(tree, own_codes=own_codes, decisions=decisions, width=model.widths[0])
        values: dict[int, float] = {}
        for node in np.unique(path).tolist():  # a loop over the tree's nodes
            inside = (path == node).any(axis=1)
            sums = np.rint([[gh[inside, 0].sum(), gh[inside, 1].sum()]]).astype(np.int64)
            values[node] = float(leaf_values(sums, params)[0])
        if any(not np.isclose(values.get(n, np.nan), v, rtol=0, atol=1e-12) for n, v in tree.leaves.items()):
            raise DataError("boosting explanations: replaying training on these rows gives other leaves; pass the "
                            "rows and labels the model was trained on")
        out.append(values)
        margin = margin + np.array([tree.leaves[int(n)] for n in path[:, -1]])
    return out


def contributions(model: BoostModel, values: Sequence[Mapping[int, float]], *, own_codes: np.ndarray,
                  decisions: Mapping[int, np.ndarray], partners: int) -> tuple[float, np.ndarray, np.ndarray]:
    """Path attribution of each row's margin.

    Returns:
        ``(bias, own, parties)``: the margin every row starts from (``base`` plus each tree's root value); the
        label party's splits' credits per own column, ``(rows, columns)``; the credits of every party,
        ``(rows, 1 + partners)`` (column 0: the label party, the sum of ``own``; column ``k``: partner ``k``).
    """
    rows, columns = own_codes.shape
    own = np.zeros((rows, columns))
    parties = np.zeros((rows, 1 + partners))
    bias = model.base
    for tree, value in zip(model.trees, values, strict=True):  # a loop over trees and levels
        bias += value[0]
        path = walk(tree, own_codes=own_codes, decisions=decisions, width=model.widths[0])
        size = max(int(path.max()), *value) + 1
        table = np.zeros(size)
        table[list(value)] = list(value.values())
        owner, column = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
        for at, split in tree.splits.items():
            owner[at], column[at] = split.party, split.column
        for level in range(path.shape[1] - 1):
            parent, child = path[:, level], path[:, level + 1]
            moved = parent != child
            delta = np.where(moved, table[child] - table[parent], 0.0)
            np.add.at(parties, (np.arange(rows), owner[parent]), delta)
            mine = moved & (owner[parent] == 0)
            np.add.at(own, (np.flatnonzero(mine), column[parent[mine]]), delta[mine])
    return float(bias), own, parties
