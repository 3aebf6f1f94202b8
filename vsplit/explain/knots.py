"""Exact integrated gradients of a piecewise-linear network: the breakpoints ("knots") of each row's path.

Theory of operation. Along the straight path ``a -> b + a (x - b)``, ``a`` in ``[0, 1]``, a network made of affine
maps and ReLUs is piecewise linear in ``a``: its gradient is constant between breakpoints, so the integral of
integrated gradients is a finite sum, ``sum over pieces of length x gradient at the piece's midpoint``, exact (the
attributions of a row then sum to ``F(x) - F(b)`` up to float rounding, not up to a quadrature error).

A row's path is held as its knots: sorted path positions from 0 to 1 (:class:`Knots`) and a segment's value at each,
the segment being affine in ``a`` between consecutive knots. A segment finds its own breakpoints from its input's
(:func:`refine`): its input is affine on every piece, so the input of its first ReLU is too and that ReLU's zero
crossings are exact; knots are added there and the segment runs again, which makes the next ReLU's input affine on
every piece, and so on until no ReLU's input changes sign inside a piece. That is a certificate, layer by layer, that
the segment is affine on every piece. Its values at any point of a piece follow by linear interpolation of the
knots' (:func:`interpolate`), which is how a reader with its own finer knots gets its input without asking again.

Only modules whose forward is known to be affine apart from ReLU/LeakyReLU modules and rtdl's piecewise-linear
numeric encoding (whose kinks are where a column crosses a bin edge) qualify (:func:`not_piecewise_linear`); anything
else (GELU, attention, a periodic numeric embedding, a module of your own) falls back to the Gauss-Legendre
quadrature of :mod:`vsplit.explain.paths`.

Example:
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 1)).double()
    >>> with torch.no_grad():
    ...     _ = net[0].weight.copy_(torch.tensor([[1.0], [-1.0]])), net[0].bias.copy_(torch.tensor([-0.5, 0.25]))
    >>> start = Knots.ends(1)
    >>> knots, out = refine(lambda alphas, rows: net(torch.from_numpy(alphas)[:, None]), net, start)
    >>> knots.alphas.tolist()  # the two ReLUs switch at a = 0.25 and a = 0.5
    [0.0, 0.25, 0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.explain.messages import MAX_KNOTS, MAX_PATH_ROWS

#: the most refinement rounds of one segment
MAX_ROUNDS = 64
#: a crossing closer than this to a knot of its row is that knot (float64 rounding, not a new piece)
SAME_POINT = 1e-12


class KnotLimit(ConfigError):
    """A row's path has more breakpoints than :data:`MAX_KNOTS` (or a segment does not settle): explain this model
    with ``method="quadrature"``."""


@dataclass(frozen=True)
class Knots:
    """Every row's path positions: ``alphas`` sorted within each row, from 0 to 1, rows one after the other;
    ``offsets (n + 1)``: where each row's knots start in ``alphas``."""

    alphas: np.ndarray
    offsets: np.ndarray

    @classmethod
    def ends(cls, n: int) -> Knots:
        """Two knots per row, 0 and 1.

        >>> Knots.ends(2).alphas.tolist(), Knots.ends(2).offsets.tolist()
        ([0.0, 1.0, 0.0, 1.0], [0, 2, 4])
        """
        return cls(alphas=np.tile([0.0, 1.0], n), offsets=np.arange(0, 2 * n + 1, 2, dtype=np.int64))

    @classmethod
    def from_counts(cls, alphas: np.ndarray, counts: np.ndarray) -> Knots:
        return cls(alphas=np.asarray(alphas, dtype=np.float64),
                   offsets=np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]))

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def rows(self) -> np.ndarray:
        """The row of each knot."""
        return np.repeat(np.arange(self.n), self.counts)

    def keys(self) -> np.ndarray:
        """One increasing number per knot (row, then position): what :func:`numpy.searchsorted` needs."""
        return self.rows * 2.0 + self.alphas

    # -- pieces: between consecutive knots of a row; piece ``i - row`` starts at knot ``i`` ------------------------
    def left(self) -> np.ndarray:
        """The first knot of every piece, in order."""
        keep = np.ones(len(self.alphas), dtype=bool)
        keep[self.offsets[1:] - 1] = False
        return np.flatnonzero(keep)

    def lengths(self) -> np.ndarray:
        i = self.left()
        return self.alphas[i + 1] - self.alphas[i]

    def midpoints(self) -> tuple[np.ndarray, np.ndarray]:
        """Each piece's middle position and its row."""
        i = self.left()
        return (self.alphas[i] + self.alphas[i + 1]) / 2, self.rows[i]

    def union(self, other: Knots) -> Knots:
        """The knots of both (same rows)."""
        if other.n != self.n:
            raise ValueError(f"knots of {self.n} and {other.n} rows")
        return _merged(np.concatenate([self.rows, other.rows]), np.concatenate([self.alphas, other.alphas]), self.n)


def _merged(rows: np.ndarray, alphas: np.ndarray, n: int) -> Knots:
    order = np.lexsort((alphas, rows))
    rows, alphas = rows[order], alphas[order]
    keep = np.ones(len(alphas), dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]) | (alphas[1:] - alphas[:-1] > SAME_POINT)
    rows, alphas = rows[keep], alphas[keep]
    # a row's end points stay exactly 0 and 1 (a crossing a hair from an end merges into it)
    counts = np.bincount(rows, minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    alphas[offsets[:-1]], alphas[offsets[1:] - 1] = 0.0, 1.0
    return Knots(alphas=alphas, offsets=offsets.astype(np.int64))


def locate(knots: Knots, alphas: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For points ``(row, alpha)``: the piece of ``knots`` holding each (its first knot's index) and the position
    inside it (0 at its first knot, 1 at its last)."""
    i = np.searchsorted(knots.keys(), rows * 2.0 + alphas, side="right") - 1
    i = np.clip(i, knots.offsets[rows], knots.offsets[rows + 1] - 2)
    lo, hi = knots.alphas[i], knots.alphas[i + 1]
    return i, np.clip((alphas - lo) / (hi - lo), 0.0, 1.0)


def interpolate(knots: Knots, values: torch.Tensor, alphas: np.ndarray, rows: np.ndarray) -> torch.Tensor:
    """A path's values at points ``(row, alpha)``: exact where it is affine between ``knots`` (``values`` at them).

    >>> k = Knots.ends(1)
    >>> interpolate(k, torch.tensor([[0.0], [2.0]]), np.array([0.25]), np.array([0])).tolist()
    [[0.5]]
    """
    if len(alphas) == len(knots.alphas) and np.array_equal(alphas, knots.alphas) and np.array_equal(rows, knots.rows):
        return values  # the knots themselves
    i, w = locate(knots, alphas, rows)
    index = torch.from_numpy(i)
    weight = torch.from_numpy(w).to(values.dtype).reshape(-1, *([1] * (values.ndim - 1)))
    return torch.lerp(values[index], values[index + 1], weight)


def gather_pieces(fine: Knots, coarse: Knots, per_piece: torch.Tensor) -> torch.Tensor:
    """Sum values given per piece of ``fine`` (which holds every knot of ``coarse``) into the pieces of ``coarse``."""
    mid, rows = fine.midpoints()
    i, _ = locate(coarse, mid, rows)
    target = torch.from_numpy(i - rows)
    out = torch.zeros((len(coarse.alphas) - coarse.n, *per_piece.shape[1:]), dtype=per_piece.dtype)
    return out.index_add_(0, target, per_piece)


def crossings(knots: Knots, z: torch.Tensor, pieces: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Where each unit of ``z`` (a kink's input at every knot, ``(points, units)``) changes sign strictly inside a
    piece (of those ``pieces`` selects), assuming it affine there: ``(rows, alphas)`` of the crossings."""
    zz = z.detach().reshape(len(z), -1).numpy()
    i = knots.left()
    if pieces is not None:
        i = i[pieces]
    zl, zr = zz[i], zz[i + 1]
    tol = 1e-12 * max(1.0, float(np.abs(zl).max(initial=0.0)), float(np.abs(zr).max(initial=0.0)))
    sl = np.where(np.abs(zl) <= tol, 0, np.sign(zl))
    sr = np.where(np.abs(zr) <= tol, 0, np.sign(zr))
    piece, _unit = np.nonzero(sl * sr < 0)
    if not len(piece):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    a, b = zl[piece, _unit], zr[piece, _unit]
    lo, hi = knots.alphas[i[piece]], knots.alphas[i[piece] + 1]
    return knots.rows[i[piece]], lo + (hi - lo) * a / (a - b)


#: the modules whose only non-linearity is a kink where their input crosses 0
KINKS: tuple[type[nn.Module], ...] = (nn.ReLU, nn.LeakyReLU)


def _affine_modules() -> tuple[type[nn.Module], ...]:
    from vsplit.models.ensemble import EnsembleTop
    from vsplit.models.merge import Concat, Mean, Sum
    from vsplit.models.numeric import NumericEmbedding
    from vsplit.models.segments import MLP
    from vsplit.models.tabular import TabularMLP
    from vsplit.models.top import TopModel

    return (nn.Linear, nn.Dropout, nn.BatchNorm1d, nn.Identity, nn.Flatten, nn.Embedding, nn.Sequential,
            nn.ModuleList, nn.ModuleDict, TabularMLP, TopModel, EnsembleTop, MLP, Concat, Sum, Mean,
            NumericEmbedding, *_rtdl_piecewise()[1:])


def _rtdl_piecewise() -> tuple[type[nn.Module], ...]:
    """rtdl's piecewise-linear encoding (its clamps are kinks, :func:`_bin_kinks`) and the affine modules around it
    (``PiecewiseLinearEmbeddings``); nothing where rtdl is not installed."""
    try:
        import rtdl_num_embeddings as rtdl
        from rtdl_num_embeddings import _NLinear, _PiecewiseLinearEncodingImpl
    except ImportError:  # pragma: no cover - a core dependency's extra
        return (nn.Module,)
    return (_PiecewiseLinearEncodingImpl, _PiecewiseLinearEncodingImpl, rtdl.PiecewiseLinearEmbeddings,
            rtdl.LinearEmbeddings, _NLinear)


def _bin_kinks(module: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """The kink inputs of rtdl's piecewise-linear encoding: each bin's position ``bias + weight x``, clamped at 0
    and at 1 (some components at one end only: a crossing that is no kink only adds a knot)."""
    pre = torch.addcmul(module.bias, module.weight, x[..., None]).detach()
    return [pre, pre - 1]


def not_piecewise_linear(module: nn.Module) -> str | None:
    """The first part of ``module`` not known to be piecewise linear with kinks only at ReLU-like modules (its
    class name), or ``None`` when exact integrated gradients apply.

    >>> not_piecewise_linear(nn.Sequential(nn.Linear(2, 2), nn.ReLU())) is None
    True
    >>> not_piecewise_linear(nn.Sequential(nn.Linear(2, 2), nn.GELU()))
    'GELU'
    """
    allowed = (*_affine_modules(), *KINKS, _rtdl_piecewise()[0])
    for part in module.modules():
        if type(part) not in allowed:
            return type(part).__name__
    return None


@contextmanager
def recording(module: nn.Module) -> Iterator[list[torch.Tensor]]:
    """The inputs of every kink module of ``module`` while it runs (in call order)."""
    seen: list[torch.Tensor] = []
    bins = _rtdl_piecewise()[0]
    handles = [m.register_forward_pre_hook(lambda _m, inputs: seen.append(inputs[0].detach()))
               for m in module.modules() if isinstance(m, KINKS)]
    handles += [m.register_forward_pre_hook(lambda m, inputs: seen.extend(_bin_kinks(m, inputs[0])))
                for m in module.modules() if type(m) is bins and bins is not nn.Module]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def refine(evaluate: Callable[[np.ndarray, np.ndarray], torch.Tensor], module: nn.Module, knots: Knots, *,
           max_knots: int = MAX_KNOTS) -> tuple[Knots, torch.Tensor]:
    """Add ``module``'s breakpoints to ``knots`` (its input being affine between them) until it is affine on every
    piece; ``evaluate(alphas, rows)`` runs it at the points ``alphas[j]`` of the paths of rows ``rows[j]``. Returns
    the knots and its output at them.

    Each round runs the module only at the knots it adds, and looks for crossings only in the pieces next to them
    (the others were checked already: their kink inputs are the same)."""
    with torch.no_grad(), recording(module) as seen:
        out = evaluate(knots.alphas, knots.rows)
    kinks = list(seen)
    fresh = np.ones(len(knots.alphas) - knots.n, dtype=bool)
    for _ in range(MAX_ROUNDS):
        found = [crossings(knots, z, fresh) for z in kinks]
        rows = np.concatenate([r for r, _ in found]) if found else np.zeros(0, dtype=np.int64)
        alphas = np.concatenate([a for _, a in found]) if found else np.zeros(0)
        rows, alphas = _new_points(knots, rows, alphas)
        if not len(rows):
            return knots, out
        if int((knots.counts + np.bincount(rows, minlength=knots.n)).max()) > max_knots:
            raise KnotLimit(f"a row's path has more than {max_knots} breakpoints; explain this model with "
                            "method='quadrature'")
        if len(knots.alphas) + len(alphas) > MAX_PATH_ROWS:
            raise KnotLimit(f"a chunk's paths have more than {MAX_PATH_ROWS} knots in all (a bound on every party's "
                            "memory); lower explain.chunk")
        with torch.no_grad(), recording(module) as seen:
            added = evaluate(alphas, rows)
        if len(seen) != len(kinks):
            raise KnotLimit("a segment ran its kink modules a different number of times on different rows; explain "
                            "this model with method='quadrature'")
        all_rows = np.concatenate([knots.rows, rows])
        all_alphas = np.concatenate([knots.alphas, alphas])
        order = torch.from_numpy(np.lexsort((all_alphas, all_rows)))
        is_new = np.concatenate([np.zeros(len(knots.alphas), bool), np.ones(len(alphas), bool)])[order.numpy()]
        out = torch.cat([out, added])[order]
        kinks = [torch.cat([old, z.reshape(len(z), *old.shape[1:])])[order] for old, z in zip(kinks, seen, strict=True)]
        counts = np.bincount(all_rows, minlength=knots.n)
        knots = Knots(alphas=all_alphas[order.numpy()], offsets=np.concatenate([[0], np.cumsum(counts)]))
        left = knots.left()
        fresh = is_new[left] | is_new[left + 1]
    raise KnotLimit(f"a segment did not settle its breakpoints in {MAX_ROUNDS} rounds; explain this model with "
                    "method='quadrature'")


def _new_points(knots: Knots, rows: np.ndarray, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The crossings that are new knots: one per point (several units may switch together), none at a knot."""
    if not len(rows):
        return rows, alphas
    order = np.lexsort((alphas, rows))
    rows, alphas = rows[order], alphas[order]
    keep = np.ones(len(rows), dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]) | (alphas[1:] - alphas[:-1] > SAME_POINT)
    rows, alphas = rows[keep], alphas[keep]
    i, _ = locate(knots, alphas, rows)
    apart = (alphas - knots.alphas[i] > SAME_POINT) & (knots.alphas[i + 1] - alphas > SAME_POINT)
    return rows[apart], alphas[apart]
