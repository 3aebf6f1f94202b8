"""The pooled reference: the same boosting on every party's bin codes in one place, in plaintext.

It is the oracle of the split protocol (:mod:`vsplit.boosting.label`, :mod:`vsplit.boosting.partner`): the same
quantized gradients, the same integer histograms, the same gains and tie-breaking (:mod:`vsplit.boosting.gains`),
grown level by level to ``max_depth``. Split across the cut, the trees come out equal: same splits, same leaves.

Example:
    >>> import numpy as np
    >>> codes = [np.array([[0], [0], [1], [1]] * 10)]
    >>> labels = np.array([0.0, 0.0, 1.0, 1.0] * 10)
    >>> model = fit_pooled(codes, labels, widths=(3,), params=BoostParams(trees=1, max_depth=1))
    >>> model.trees[0].splits[0].key()
    (0, 0, 0, False)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vsplit.boosting.bins import full_ranks
from vsplit.boosting.gains import (
    BoostParams,
    base_margin,
    best_splits,
    category_ranks,
    goes_left,
    histograms,
    leaf_values,
    quantize,
    root_row_hessian,
    weighted_gradients,
)
from vsplit.boosting.trees import BoostModel, Split, Tree


def grow_level(nodes: np.ndarray, chosen: dict[int, np.ndarray]) -> np.ndarray:
    """Next level's node per row: ``chosen[node]`` is the left flag of every row (rows outside the node ignored)."""
    after = np.full_like(nodes, -1)
    for node, left in chosen.items():  # a loop over split nodes
        here = nodes == node
        after[here] = 2 * node + np.where(left[here], 1, 2)
    return after


def _summed(tree_nodes: np.ndarray, gh: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The leaf ids, each row's slot among them and each leaf's integer sums ``(leaves, 2)``."""
    ids, slot = np.unique(tree_nodes, return_inverse=True)
    sums = np.stack([np.bincount(slot, weights=gh[:, j].astype(np.float64)) for j in range(2)], axis=1)
    return ids, slot, np.rint(sums).astype(np.int64)


def leaves_of(tree_nodes: np.ndarray, gh: np.ndarray, params: BoostParams) -> tuple[dict[int, float], np.ndarray]:
    """Leaf values by node id, and each row's leaf value, from each row's final node."""
    ids, slot, sums = _summed(tree_nodes, gh)
    values = leaf_values(sums, params)
    return {int(i): float(v) for i, v in zip(ids, values, strict=True)}, values[slot]


def leaf_sums(tree_nodes: np.ndarray, gh: np.ndarray) -> dict[int, tuple[int, int]]:
    """Each leaf's integer gradient and hessian sums by node id (:attr:`vsplit.boosting.trees.Tree.sums`)."""
    ids, _, sums = _summed(tree_nodes, gh)
    return {int(i): (int(g), int(h)) for i, (g, h) in zip(ids, sums.tolist(), strict=True)}


def fit_pooled(codes: Sequence[np.ndarray], labels: np.ndarray, *, widths: Sequence[int],
               params: BoostParams) -> BoostModel:
    """Boost on every party's codes pooled (party 0 is the label party); the split protocol's oracle.

    Args:
        codes: per party, int ``(rows, columns)`` bin codes; the last code of a column (``width - 1``) is missing.
        labels: 0/1 per row.
        widths: per party, codes per column (value bins + the missing code).
        params: the boosting settings.
    """
    labels = np.asarray(labels, dtype=np.float64)
    base = base_margin(labels)
    margin = np.full(len(labels), base)
    trees, records = [], [0] * len(codes)  # a partner numbers its records in this order: tree, level, node
    for tree in range(params.trees):
        values, _weights = weighted_gradients(margin, labels, params, tree=tree)  # GOSS weights, if any
        gh = quantize(values[:, 0], values[:, 1], scale=params.scale)
        tree_nodes = np.zeros(len(labels), dtype=np.int64)  # each row's node; it ends as the row's leaf
        nodes, splits = tree_nodes.copy(), {}
        for _depth in range(params.max_depth):
            ids, slots = np.unique(nodes[nodes >= 0], return_inverse=True)
            if not len(ids):
                break
            where = np.full(len(nodes), -1)
            where[nodes >= 0] = slots
            hists = [histograms(c, gh, where, n_nodes=len(ids), width=w) for c, w in zip(codes, widths, strict=True)]
            totals = node_totals(gh, where, n_nodes=len(ids))
            chosen = {}
            for node, choice in zip(ids, best_splits(hists, totals, params), strict=True):
                if choice is None:
                    continue
                record = records[choice.party] if choice.party else -1
                records[choice.party] += 1
                splits[int(node)] = Split(party=choice.party, column=choice.column, bin=choice.bin,
                                          missing_left=choice.missing_left, record=record)
                chosen[int(node)] = goes_left(codes[choice.party][:, choice.column], bin=choice.bin,
                                              missing_left=choice.missing_left, width=widths[choice.party])
            nodes = grow_level(nodes, chosen)
            tree_nodes = np.where(nodes >= 0, nodes, tree_nodes)
        leaves, values = leaves_of(tree_nodes, gh, params)
        margin = margin + values
        trees.append(Tree(splits=splits, leaves=leaves, sums=leaf_sums(tree_nodes, gh)))
    return BoostModel(trees=tuple(trees), base=base, widths=tuple(widths))


def pooled_ranks(codes: Sequence[np.ndarray], labels: np.ndarray, *, widths: Sequence[int], params: BoostParams,
                 categorical: Sequence[Sequence[int]]) -> list[np.ndarray | None]:
    """Per party, the renumbering of its codes ``(columns, width)`` that the split protocol makes at the first tree's
    root with ``params.order_categories`` (``None`` for a party without categorical columns): the same root cells,
    so the same :func:`~vsplit.boosting.gains.category_ranks`. Apply them (:func:`~vsplit.boosting.bins.rank_codes`)
    before :func:`fit_pooled`.

    Example:
        >>> import numpy as np
        >>> codes = [np.array([[0], [1], [2], [2]] * 5)]
        >>> labels = np.array([0.0, 1.0, 0.0, 0.0] * 5)
        >>> params = BoostParams(min_category_rows=5)
        >>> pooled_ranks(codes, labels, widths=(4,), params=params, categorical=[(0,)])[0].tolist()
        [[1, 0, 2, 3]]
    """
    values, _weights = weighted_gradients(np.full(len(labels), base_margin(labels)), np.asarray(labels, np.float64),
                                          params, tree=0)
    gh = quantize(values[:, 0], values[:, 1], scale=params.scale)
    out: list[np.ndarray | None] = []
    for party_codes, width, columns in zip(codes, widths, categorical, strict=True):
        if not columns:
            out.append(None)
            continue
        root = histograms(party_codes, gh, np.zeros(len(labels), dtype=np.int64), n_nodes=1, width=width)[0]
        ranks = category_ranks(root, columns, params, row_hessian=root_row_hessian(labels, params))
        out.append(full_ranks(party_codes.shape[1], width, dict(zip(columns, ranks, strict=True))))
    return out


def node_totals(gh: np.ndarray, slots: np.ndarray, *, n_nodes: int) -> np.ndarray:
    """Each node's integer gradient and hessian sums, ``(n_nodes, 2)`` (``slots`` as in ``histograms``)."""
    where = slots
    inside = where >= 0
    sums = [np.bincount(where[inside], weights=gh[inside, j].astype(np.float64), minlength=n_nodes) for j in range(2)]
    return np.rint(np.stack(sums, axis=1)).astype(np.int64)
