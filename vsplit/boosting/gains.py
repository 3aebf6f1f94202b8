"""The arithmetic both the pooled reference and the split protocol share: gradients, their fixed point, histograms,
split gains and leaf values.

Theory of operation: the trees are equal across the cut only if every number that decides them is computed the same
way on the same integers. So gradients are quantized once (:func:`quantize`: ``round(v * scale)``, exactly as
:meth:`vsplit.he.Packing.to_integers` does before encryption), every histogram is an int64 sum of those integers (a
homomorphic sum decrypts to the same integers), and :func:`best_splits` turns integer histograms into gains with one
vectorized formula. Candidates are ranked in one order, party (the label party first), column, bin, then missing
values right before left; the first candidate with the largest gain wins, so ties break the same way everywhere.

Example:
    >>> import numpy as np
    >>> g, h = gradients(np.zeros(4), np.array([1.0, 0.0, 1.0, 1.0]))
    >>> quantize(g, h, scale=4).tolist()
    [[-2, 1], [2, 1], [-2, 1], [-2, 1]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ConfigError

#: the bounds of a logistic loss's gradient and hessian, which size the encryption's fixed point
BOUNDS = (1.0, 0.25)


@dataclass(frozen=True)
class BoostParams:
    """Second-order boosting settings, shared by the label party and the pooled reference (XGBoost's names).

    Example:
        >>> BoostParams(trees=3, max_depth=2).learning_rate
        0.3
    """

    trees: int = 5
    max_depth: int = 3
    learning_rate: float = 0.3
    reg_lambda: float = 1.0
    gamma: float = 0.0
    min_child_weight: float = 1.0
    #: fixed point of the gradients: ``round(g * scale)``; 2**16 keeps leaves within ~1e-5 of float boosting
    scale: int = 2**16
    #: GOSS (SecureBoost+): per tree keep the rows of the largest ``goss_top_rate`` share of ``|g|``, sample
    #: ``goss_other_rate`` of all rows among the rest, weight those by ``(1 - top) / other``; 0 and 0: every row
    goss_top_rate: float = 0.0
    goss_other_rate: float = 0.0
    #: seeds the GOSS sample (the label party's; the pooled reference draws the same rows)
    seed: int = 0
    #: order each categorical column's codes by the label party's gradient ratio at the first tree's root (the
    #: category's smoothed label rate, :func:`category_ranks`) before any split, so a threshold splits the categories
    #: by rate, not by frequency; a partner learns that order of its categories (docs/boosting.md)
    order_categories: bool = False
    #: with ``order_categories``: a code of fewer rows (its root hessian sum over one row's) is not ordered but keeps
    #: its place after the ordered ones, so its rank tells nothing of its few customers' labels
    min_category_rows: int = 30

    def __post_init__(self) -> None:
        checks = {"trees": 1 <= self.trees <= 10_000, "max_depth": 1 <= self.max_depth <= 16,
                  "learning_rate": 0 < self.learning_rate <= 1, "reg_lambda": self.reg_lambda >= 0,
                  "gamma": self.gamma >= 0, "min_child_weight": self.min_child_weight >= 0,
                  "scale": isinstance(self.scale, int) and 1 <= self.scale <= 2**30,
                  "goss_top_rate": 0 <= self.goss_top_rate < 1,
                  "goss_other_rate": 0 <= self.goss_other_rate <= 1 - self.goss_top_rate
                  and (self.goss_other_rate > 0) == (self.goss_top_rate > 0),
                  "order_categories": isinstance(self.order_categories, bool),
                  "min_category_rows": isinstance(self.min_category_rows, int) and self.min_category_rows >= 1}
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ConfigError(f"boosting: {bad[0]} = {getattr(self, bad[0])!r} is out of range; see BoostParams")


def base_margin(labels: np.ndarray) -> float:
    """The starting log-odds: the label mean, clipped away from 0 and 1."""
    p = min(max(float(np.mean(labels)), 1e-6), 1 - 1e-6)
    return float(np.log(p / (1 - p)))


def gradients(margin: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logistic loss: ``g = p - y``, ``h = p (1 - p)`` with ``p = sigmoid(margin)``."""
    p = 1.0 / (1.0 + np.exp(-margin))
    return p - labels, p * (1.0 - p)


def goss_weights(g: np.ndarray, params: BoostParams, *, tree: int) -> np.ndarray:
    """Each row's weight in tree ``tree``: 1 for the top ``goss_top_rate`` rows by ``|g|`` (ties by row), the
    amplification ``(1 - top) / other`` for ``goss_other_rate`` of all rows drawn among the rest, 0 elsewhere (all 1
    without GOSS). Seeded by ``(params.seed, tree)``, so the label party and the pooled reference draw the same rows.

    Example:
        >>> import numpy as np
        >>> w = goss_weights(np.arange(10.0), BoostParams(goss_top_rate=0.2, goss_other_rate=0.2), tree=0)
        >>> w[8:].tolist(), int((w == 4).sum()), int((w == 0).sum())
        ([1.0, 1.0], 2, 6)
    """
    rows = len(g)
    if not params.goss_top_rate:
        return np.ones(rows)
    top = int(params.goss_top_rate * rows)
    other = min(max(int(params.goss_other_rate * rows), 1), rows - top)
    order = np.lexsort((np.arange(rows), -np.abs(g)))  # largest |g| first, ties by row
    weights = np.zeros(rows)
    weights[order[:top]] = 1.0
    rng = np.random.default_rng([params.seed, tree])
    weights[rng.choice(order[top:], size=other, replace=False)] = (1 - params.goss_top_rate) / params.goss_other_rate
    return weights


def goss_bound(params: BoostParams) -> float:
    """The largest GOSS weight (1 without GOSS): it scales the bounds the encryption's fixed point is planned for."""
    return max(1.0, (1 - params.goss_top_rate) / params.goss_other_rate) if params.goss_top_rate else 1.0


def weighted_gradients(margin: np.ndarray, labels: np.ndarray, params: BoostParams, *,
                       tree: int) -> tuple[np.ndarray, np.ndarray]:
    """Tree ``tree``'s float gradient and hessian ``(rows, 2)``, GOSS weights applied, and the weights."""
    g, h = gradients(margin, labels)
    weights = goss_weights(g, params, tree=tree)
    return np.stack([g * weights, h * weights], axis=1), weights


def summed_directly(ids: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Which nodes of a level a partner sums (the rest the label party derives as ``parent - sibling``).

    A node is derived when its sibling is at the level too and has fewer rows (``sizes``: the rows that carry a
    gradient), the right child on a tie; the root and a node without sibling are summed. Both parties compute it from
    what they both know.

    Example:
        >>> import numpy as np
        >>> summed_directly(np.array([1, 2, 3, 5, 6]), np.array([5, 2, 4, 3, 3])).tolist()
        [False, True, True, True, False]
    """
    size = dict(zip(ids.tolist(), sizes.tolist(), strict=True))
    derived = [i > 0 and _sibling(i) in size and (size[i], i % 2 == 0) > (size[_sibling(i)], _sibling(i) % 2 == 0)
               for i in ids.tolist()]
    return ~np.array(derived, dtype=bool)


def _sibling(node: int) -> int:
    return node + 1 if node % 2 == 1 else node - 1


def quantize(g: np.ndarray, h: np.ndarray, *, scale: int) -> np.ndarray:
    """``(rows, 2)`` int64: ``round(v * scale)``, the integers the encryption packs."""
    return np.rint(np.stack([g, h], axis=1) * scale).astype(np.int64)


def histograms(codes: np.ndarray, gh: np.ndarray, slots: np.ndarray, *, n_nodes: int, width: int) -> np.ndarray:
    """Integer sums of ``gh`` per (node, column, bin): shape ``(n_nodes, columns, width, 2)``.

    ``slots[i]`` is row ``i``'s node position in ``0..n_nodes-1``, or -1 when the row is in no node.
    """
    inside = slots >= 0
    cols = codes.shape[1]
    keys = ((slots[inside, None] * cols + np.arange(cols)) * width + codes[inside]).ravel()
    size = n_nodes * cols * width
    out = np.empty((size, 2), dtype=np.int64)
    for j in range(2):  # gradient, hessian; exact: the sums stay far below 2**53
        weights = np.repeat(gh[inside, j].astype(np.float64), cols)
        out[:, j] = np.rint(np.bincount(keys, weights=weights, minlength=size)).astype(np.int64)
    return out.reshape(n_nodes, cols, width, 2)


def _score(g: np.ndarray, h: np.ndarray, params: BoostParams) -> np.ndarray:
    gf, hf = g / params.scale, h / params.scale
    return gf * gf / (hf + params.reg_lambda)


@dataclass(frozen=True)
class Choice:
    """The best split of a node: its gain and where (party, column, bin, missing direction); ``gain <= 0``: none."""

    gain: float
    party: int
    column: int
    bin: int
    missing_left: bool


def best_splits(hists: list[np.ndarray], totals: np.ndarray, params: BoostParams) -> list[Choice | None]:
    """The best split of each node over every party's histograms (``None``: the node becomes a leaf).

    Args:
        hists: per party, int64 ``(n_nodes, columns, width, 2)``; the last bin of each column holds missing values.
        totals: int64 ``(n_nodes, 2)``: each node's gradient and hessian sums.
        params: lambda, gamma, min_child_weight and the scale.
    """
    gains = []
    for hist in hists:
        n, _, width, _ = hist.shape
        cum = np.cumsum(hist[:, :, : width - 1], axis=2)  # code <= t goes left, t in 0..width-2
        miss = hist[:, :, width - 1 : width]
        left = np.stack([cum, cum + miss], axis=3)  # (n, cols, width-1, 2 directions: right, left, 2)
        right = totals[:, None, None, None, :] - left
        gain = 0.5 * (_score(left[..., 0], left[..., 1], params) + _score(right[..., 0], right[..., 1], params)
                      - _score(totals[:, 0], totals[:, 1], params)[:, None, None, None]) - params.gamma
        hl, hr = left[..., 1], right[..., 1]
        mcw = params.min_child_weight * params.scale
        valid = (hl > 0) & (hr > 0) & (hl >= mcw) & (hr >= mcw)
        gains.append(np.where(valid, gain, -np.inf).reshape(n, -1))
    flat = np.concatenate(gains, axis=1)
    offsets = np.cumsum([0] + [g.shape[1] for g in gains])
    choices: list[Choice | None] = []
    for node in range(len(totals)):  # a loop over a level's nodes, not rows
        k = int(np.argmax(flat[node]))
        if not flat[node, k] > 0:
            choices.append(None)
            continue
        party = int(np.searchsorted(offsets, k, side="right")) - 1
        width = hists[party].shape[2]
        column, rest = divmod(k - int(offsets[party]), (width - 1) * 2)
        choices.append(Choice(gain=float(flat[node, k]), party=party, column=column, bin=rest // 2,
                              missing_left=bool(rest % 2)))
    return choices


def category_ranks(root: np.ndarray, columns: Sequence[int], params: BoostParams, *, row_hessian: float) -> np.ndarray:
    """Each code's new code, ``(len(columns), width)`` int32: a column's value codes ordered by ``G / (H + lambda)``
    of its root cell (ascending: the highest smoothed label rate first at the first tree), ties by code; a code of
    fewer than ``params.min_category_rows`` rows (``H`` under that many ``row_hessian``, empty codes included) is
    not ordered: those follow in their own order. The missing code (``width - 1``) keeps its place.

    Args:
        root: int64 ``(columns, width, 2)``: the first tree's root histogram of one party (every column).
        columns: which columns to order (its categorical ones).
        params: ``reg_lambda``, ``min_category_rows`` and the scale.
        row_hessian: one row's quantized hessian at the first tree (:func:`root_row_hessian`).

    Example:
        >>> import numpy as np
        >>> root = np.array([[[4, 8], [-6, 8], [0, 0], [1, 4], [0, 1]]])  # codes 0..3 and the missing code
        >>> category_ranks(root, [0], BoostParams(scale=4, min_category_rows=2), row_hessian=1.0).tolist()
        [[2, 0, 3, 1, 4]]
        >>> category_ranks(root, [0], BoostParams(scale=4, min_category_rows=5), row_hessian=1.0).tolist()
        [[1, 0, 2, 3, 4]]
    """
    width = root.shape[1]
    out = np.empty((len(columns), width), dtype=np.int32)
    for k, column in enumerate(columns):  # a loop over categorical columns
        g, h = root[column, : width - 1, 0], root[column, : width - 1, 1]
        small = h < params.min_category_rows * row_hessian
        ratio = np.where(small, 0.0, (g / params.scale) / (h / params.scale + params.reg_lambda))
        order = np.lexsort((np.arange(width - 1), ratio, small))
        out[k, order] = np.arange(width - 1)
        out[k, width - 1] = width - 1
    return out


def root_row_hessian(labels: np.ndarray, params: BoostParams) -> float:
    """One row's quantized hessian at the first tree (``p (1 - p) * scale`` at the base margin): what
    :func:`category_ranks` counts a code's rows in.

    >>> root_row_hessian(np.array([0.0, 1.0]), BoostParams(scale=4))
    1.0
    """
    p = 1.0 / (1.0 + np.exp(-base_margin(labels)))
    return float(p * (1.0 - p) * params.scale)


def reorder(hist: np.ndarray, columns: Sequence[int], ranks: np.ndarray) -> np.ndarray:
    """A party's histograms ``(nodes, columns, width, 2)`` with ``columns``' codes renumbered by ``ranks``
    (:func:`category_ranks`): the cell of code ``b`` moves to ``ranks[k, b]``."""
    out = hist.copy()
    for k, column in enumerate(columns):
        out[:, column, ranks[k]] = hist[:, column]
    return out


def leaf_values(sums: np.ndarray, params: BoostParams) -> np.ndarray:
    """Leaf outputs, learning rate included: ``-lr * G / (H + lambda)`` from integer sums ``(leaves, 2)``."""
    g, h = sums[:, 0] / params.scale, sums[:, 1] / params.scale
    return -params.learning_rate * g / (h + params.reg_lambda)


def goes_left(codes: np.ndarray, *, bin: int, missing_left: bool, width: int) -> np.ndarray:
    """Bool per row: ``code <= bin`` for values; the missing code (``width - 1``) follows ``missing_left``."""
    missing = codes == width - 1
    return np.where(missing, missing_left, codes <= bin)
