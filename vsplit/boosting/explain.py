"""Per-party contributions of a boosted model's score, from what the label party already holds (no extra traffic).

Theory of operation: path attribution (Saabas). Every node of a tree has a value, the leaf value it would have been
had the tree stopped there (``-lr * G / (H + lambda)`` of the training rows reaching it, the same fixed point and
formula as the leaves: :func:`vsplit.boosting.gains.leaf_values`). A row walks from the root to its leaf; each split
on its way moves the value from the node's to the child's, and that change is credited to the party that owns the
split (and, for the label party's own splits, to its column). Over a tree the changes telescope to ``leaf - root``,
so ``base + sum of the roots + every credit`` is the row's margin, up to float64 rounding. The label party knows the
owner of every split and, from the one prediction round, the partners' bits. The node values come from what
training kept (:func:`kept_values`): each leaf's integer gradient and hessian sums
(:attr:`~vsplit.boosting.trees.Tree.sums`, in ``model.npz``), a split node's being its leaves'; ``bias``, the margin
every row starts from, is the trees' expected value. :func:`node_values` computes the same values by replaying
training on the training rows (a check, and a way to explain a model saved without the sums).
:class:`ExplainPredict` is the prediction round keeping the partners' bits: no message beyond ``vsplit predict``'s.

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
from vsplit.boosting.predict import LabelPredict
from vsplit.boosting.trees import BoostModel, Tree
from vsplit.errors import DataError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message


def walk(tree: Tree, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray], width: int) -> np.ndarray:
    """Each row's node at every level of ``tree``, ``(rows, depth + 1)``; a row that reached its leaf stays there.

    The same walk as :meth:`BoostModel.margins`: the label party's splits from its codes, a partner's from its bits.
    """
    rows = len(own_codes)
    node = np.zeros(rows, dtype=np.int64)
    path = [node]
    for level in tree.by_level():  # a loop over levels and their split nodes, not rows
        after = node.copy()
        for at, split in level:
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


def kept_values(model: BoostModel, params: BoostParams) -> list[dict[int, float]]:
    """Every node's value in every tree from the integer sums training kept (the leaves' values are the model's).

    Raises:
        DataError: a tree without its sums (a model saved before they were kept): retrain, or replay with
            :func:`node_values`.

    Example:
        >>> tree = Tree(leaves={1: -0.15, 2: 0.075}, sums={1: (2 * 2**16, 3 * 2**16), 2: (-2**16, 3 * 2**16)})
        >>> model = BoostModel(trees=(tree,), base=0.0, widths=(3,))
        >>> {n: round(v, 6) for n, v in kept_values(model, BoostParams())[0].items()}
        {0: -0.042857, 1: -0.15, 2: 0.075}
    """
    out = []
    for k, tree in enumerate(model.trees):  # a loop over trees
        if tree.sums.keys() != tree.leaves.keys():
            raise DataError(f"boosting explanations: tree {k} keeps no gradient sums (a model saved before "
                            "explanations were supported); train the run again to explain it")
        sums = tree.node_sums()
        nodes = sorted(sums)
        values = dict(zip(nodes, leaf_values(np.array([sums[n] for n in nodes], dtype=np.int64).reshape(-1, 2),
                                             params).tolist(), strict=True))
        if any(not np.isclose(values[n], v, rtol=0, atol=1e-12) for n, v in tree.leaves.items()):
            raise DataError(f"boosting explanations: tree {k}'s kept sums give other leaves than its own; the "
                            "model file was changed or the settings differ from training ([boosting])")
        out.append(values)
    return out


class ExplainPredict(LabelPredict):
    """The label party's prediction round keeping each partner's bits (``bits``: partner index -> uint8
    ``(rows, records)``), for explanations and early stopping; the messages are :class:`LabelPredict`'s."""

    def __init__(self, model: BoostModel, *, own_codes: np.ndarray, partners: Sequence[str]) -> None:
        super().__init__(model, own_codes=own_codes, partners=partners)
        self.bits: dict[int, np.ndarray] = {}

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take one partner's bits (checked by :class:`LabelPredict`) and keep them."""
        out = super().receive(sender, msg)
        self.bits[self.partners.index(sender) + 1] = np.asarray(msg.bits)  # type: ignore[attr-defined]
        return out


def node_values(model: BoostModel, *, own_codes: np.ndarray, decisions: Mapping[int, np.ndarray],
                labels: np.ndarray, params: BoostParams) -> list[dict[int, float]]:
    """Every node's value in every tree, replaying training on its rows (the rows the model was trained on, every row
    unweighted: a model trained with GOSS needs :func:`kept_values`).

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
