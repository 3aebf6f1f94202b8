"""Integrated gradients on one party's own rows: the path from a baseline row to each row, and the attributions.

Theory of operation. Integrated gradients (Sundararajan et al., 2017) attributes a score ``F(x) - F(b)`` to the
inputs: ``A_i = (x_i - b_i) * integral over a in [0, 1] of dF/dx_i(b + a (x - b))``. In a split network ``F`` is
cut between parties, but by the chain rule ``dF/dx_i = dF/de . de/dx_i`` where ``e`` is the output of the party's
own (source) segment. So the party runs its segment on the interpolated rows, sends their outputs across the cut as
scoring does, gets back ``dF/de`` at every path point as training does, and finishes the attributions of its own
columns locally: nobody else needs its columns, its baseline or its per-feature results.

The integral is a Gauss-Legendre quadrature with ``steps`` nodes (:func:`path_points`), with the two ends added at
weight 0 so that the label party also gets ``F(b)`` and ``F(x)`` from the same pass (completeness: the attributions
of every column of every party sum to ``F(x) - F(b)`` up to the quadrature error). For a piecewise-linear network,
:mod:`vsplit.explain.knots` integrates exactly instead, with one point per piece of each row's own path.

Categorical columns cannot be interpolated as codes; where the segment embeds them with ``nn.Embedding`` layers in a
``embeddings`` list (the default :class:`~vsplit.models.tabular.TabularMLP`), the path runs through each column's
embedding instead (Captum's "layer" integrated gradients on the embedding), from the mean embedding of the party's
training rows. A module of your own without such a list keeps its categorical inputs at each row's values: its
categorical columns get no attribution, and the baseline is the row with its numeric columns at their means.

Example:
    >>> import torch
    >>> from vsplit.models.tabular import TabularMLP
    >>> model = TabularMLP(cardinalities=[3], n_numeric=2, out_dim=4)
    >>> cat, num = torch.tensor([[1], [2]]), torch.tensor([[0.5, -1.0], [1.0, 0.0]])
    >>> base = Baseline.fit(model, (cat, num))
    >>> alphas, weights = path_points(32)
    >>> path = SourcePath(model, (cat, num), base, alphas)
    >>> path.output.shape  # (34 path points x 2 rows, width)
    torch.Size([68, 4])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vsplit.errors import ConfigError

#: the most quadrature nodes a path may have
MAX_STEPS = 512


def path_points(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The path's points ``a`` in ``[0, 1]`` and their quadrature weights: 0, ``steps`` Gauss-Legendre nodes, 1
    (the two ends weigh 0: they give ``F(b)`` and ``F(x)``).

    >>> a, w = path_points(4)
    >>> float(a[0]), float(a[-1]), round(float(w.sum()), 12), len(a)
    (0.0, 1.0, 1.0, 6)
    """
    if not 1 <= steps <= MAX_STEPS:
        raise ConfigError(f"explain steps must be 1 to {MAX_STEPS}, got {steps}")
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    alphas = np.concatenate([[0.0], (nodes + 1) / 2, [1.0]])
    return alphas, np.concatenate([[0.0], weights / 2, [0.0]])


def embedding_layers(module: nn.Module, n_categorical: int) -> list[nn.Embedding] | None:
    """The segment's per-column category embeddings (its ``embeddings`` list), if it has one per column."""
    layers = getattr(module, "embeddings", None)
    if isinstance(layers, nn.ModuleList) and len(layers) == n_categorical \
            and all(isinstance(e, nn.Embedding) for e in layers):
        return list(layers)
    return None


@dataclass(frozen=True)
class Baseline:
    """The reference row a party's attributions start from: the mean of its training rows' numeric inputs and
    (where the segment embeds categories) the mean embedding of each categorical column."""

    num: torch.Tensor
    cat: tuple[torch.Tensor, ...] | None

    @classmethod
    def fit(cls, module: nn.Module, inputs: Sequence[torch.Tensor]) -> Baseline:
        """The baseline of ``module``'s training ``inputs`` ``(cat, num)``."""
        cat, num = inputs
        with torch.no_grad():
            mean = num.float().mean(0) if len(num) else torch.zeros(num.shape[1])
            layers = embedding_layers(module, cat.shape[1])
            embedded = None if layers is None else tuple(
                (e(cat[:, i]).mean(0) if len(cat) else torch.zeros(e.embedding_dim)) for i, e in enumerate(layers))
        return cls(num=mean.detach(), cat=embedded)


class SourcePath:
    """One chunk of a party's rows on the path: its source segment's output at every path point (``output``, the
    tensor that crosses the cut, path-point major) and, from the gradient of the score with respect to it, the
    attribution of each input column (:meth:`attributions`).

    ``alphas`` are the path points every row shares; or, with ``rows``, one point per entry: ``alphas[j]`` on the
    path of row ``rows[j]`` (exact integrated gradients, :mod:`vsplit.explain.knots`). ``dtype``: the precision the
    path is computed in (the module's own).
    """

    def __init__(self, module: nn.Module, inputs: Sequence[torch.Tensor], baseline: Baseline,
                 alphas: np.ndarray, rows: np.ndarray | None = None, *, dtype: torch.dtype = torch.float32) -> None:
        cat, num = inputs
        self.n = len(num)
        alphas = np.asarray(alphas, dtype=np.float64)
        if rows is None:
            rows = np.tile(np.arange(self.n), len(alphas))
            alphas = np.repeat(alphas, self.n)
        self.rows = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        a = torch.from_numpy(alphas).to(dtype)[:, None]
        self.num_delta = (num.to(dtype) - baseline.num.to(dtype)).detach()
        self.num_leaf = (baseline.num.to(dtype) + a * self.num_delta[self.rows]).detach().requires_grad_()
        self.cat_leaves: list[torch.Tensor] = []
        self.cat_deltas: list[torch.Tensor] = []
        layers = embedding_layers(module, cat.shape[1]) if baseline.cat is not None else None
        handles = []
        if layers is not None:
            assert baseline.cat is not None
            with torch.no_grad():
                own = [layer(cat[:, i]).to(dtype) for i, layer in enumerate(layers)]
            for layer, base, mine in zip(layers, baseline.cat, own, strict=True):
                handles.append(layer.register_forward_hook(self._hook(base.to(dtype), mine, a)))
        try:
            self.output = module(cat[self.rows], self.num_leaf)
        finally:
            for handle in handles:
                handle.remove()
        if not isinstance(self.output, torch.Tensor):
            raise ConfigError("explain needs each source segment to return one tensor")
        self.has_categorical = layers is not None

    def _hook(self, base: torch.Tensor, own: torch.Tensor, a: torch.Tensor) -> Callable[..., torch.Tensor]:
        def hook(_module: nn.Module, _inputs: tuple, _out: torch.Tensor) -> torch.Tensor:
            delta = own - base  # the rows' own embeddings against the baseline's
            leaf = (base + a * delta[self.rows]).detach().requires_grad_()
            self.cat_deltas.append(delta)
            self.cat_leaves.append(leaf)
            return leaf

        return hook

    def attributions(self, grad: torch.Tensor) -> torch.Tensor:
        """Per-row attributions ``(n, n_categorical + n_numeric)`` (categorical columns first, as the segment reads
        them) from ``grad``, the weighted gradient of the score with respect to :attr:`output` at every path point.
        A categorical column without an embedding path gets 0."""
        leaves = [*self.cat_leaves, self.num_leaf]
        grads = torch.autograd.grad(self.output, leaves, grad_outputs=grad, allow_unused=True)
        parts = []
        for leaf, g, delta in zip(leaves, grads, [*self.cat_deltas, self.num_delta], strict=True):
            g = torch.zeros_like(leaf) if g is None else g
            summed = torch.zeros((self.n, *g.shape[1:]), dtype=g.dtype).index_add_(0, self.rows, g)
            contribution = delta * summed
            parts.append(contribution if leaf is self.num_leaf else contribution.sum(1, keepdim=True))
        out = torch.cat(parts, dim=1).detach()
        return out


def column_names(categorical: Sequence[str], numeric: Sequence[str], indicators: Sequence[str]) -> list[str]:
    """The table column each input of a segment comes from: categorical codes, numeric columns, then the
    was-missing indicators of imputed columns (named after their column, so their attribution adds to it).

    >>> column_names(["job"], ["age", "income"], ["income"])
    ['job', 'age', 'income', 'income']
    """
    return [*categorical, *numeric, *indicators]


def by_column(values: np.ndarray, inputs: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Sum the attributions of inputs that come from the same column; the columns in first-seen order.

    >>> names, v = by_column(np.array([[1.0, 2.0, 3.0]]), ["a", "b", "a"])
    >>> names, v.tolist()
    (['a', 'b'], [[4.0, 2.0]])
    """
    names = list(dict.fromkeys(inputs))
    index = {n: i for i, n in enumerate(names)}
    out = np.zeros((values.shape[0], len(names)), dtype=np.float64)
    for j, name in enumerate(inputs):
        out[:, index[name]] += values[:, j]
    return names, out
