"""The messages of joint explanation (integrated gradients through the cuts). Type codes 0x0B01-0x0BFF.

What crosses, and why: the coordinator (the label party) asks for an explanation of ``n_rows`` aligned rows with a
path of ``steps`` points (:class:`ExplainRequest`); every cut then carries, per chunk of rows, the outputs of the
segment before it at every path point (:class:`PathActivations`: the tensors scoring sends, for the interpolated
rows between the sender's baseline and each row) and back the gradient of the score with respect to them
(:class:`PathGradients`: the tensors training sends). A party with columns of its own then tells the coordinator one
number per row, its group's attribution (:class:`GroupAttribution`), and, only if its config allows, the names of its
``k`` most influential columns per row: never its per-feature attributions, values or baseline.

With exact integrated gradients (``method="exact"``, :mod:`vsplit.explain.knots`) the path points are each row's
breakpoints instead of shared nodes: a cut carries the sender's output at the knots of its rows' paths, with the
knots' positions (:class:`KnotActivations`), and back the gradient integrated over each piece between two knots
(:class:`PieceGradients`). The positions are where the sender's segment (and what feeds it) bends along the path: a
reader of its outputs at enough shared nodes could locate them as well, so they reveal no more than the path does.

Example:
    >>> import numpy as np
    >>> GroupAttribution(chunk=0, totals=np.zeros(3), top=np.zeros((3, 0), np.int32), names="").totals.shape
    (3,)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.protocol.message import Message, all_finite, message, require, require_array

#: separates the column names of a :class:`GroupAttribution` (a byte no column name holds)
NAME_SEP = "\x1f"
#: the most rows per chunk and the most names a party may share per row
MAX_CHUNK = 1 << 16
MAX_TOP_K = 64
#: the most path rows (rows per chunk times path points) a party computes at once: a bound on its memory
MAX_PATH_ROWS = 1 << 20
#: the ways to integrate along the path
METHODS = ("quadrature", "exact")
#: the most knots one row's path may have (exact method)
MAX_KNOTS = 4096


@message(0x0B01)
@dataclass(frozen=True)
class ExplainRequest(Message):
    """Coordinator -> every other party: explain ``n_rows`` aligned rows, ``chunk`` rows at a time, with ``steps``
    quadrature nodes (:func:`vsplit.explain.paths.path_points`), or ``method="exact"``: each row's breakpoints
    (:mod:`vsplit.explain.knots`); ``topology``: the coordinator's fingerprint."""

    n_rows: int
    chunk: int
    steps: int
    topology: str
    method: str = "quadrature"

    def __post_init__(self) -> None:
        require(self.n_rows >= 0, "n_rows must be non-negative")
        require(1 <= self.chunk <= MAX_CHUNK, f"chunk must be 1 to {MAX_CHUNK}")
        require(1 <= self.steps <= 512, "steps must be 1 to 512")
        require(self.chunk * (self.steps + 2) <= MAX_PATH_ROWS,
                f"chunk x (steps + 2) must be at most {MAX_PATH_ROWS} path rows; lower explain.chunk")
        require(0 < len(self.topology) <= 64, "topology fingerprint must be 1 to 64 characters")
        require(self.method in METHODS, f"method must be one of {', '.join(METHODS)}")


def _check_tensor(values: np.ndarray) -> None:
    require_array("values", values, dtype="float32", ndim=2)
    require(all_finite(values), "values must be finite")


@message(0x0B02)
@dataclass(frozen=True)
class PathActivations(Message):
    """The output of the segment before cut ``cut`` at every path point of chunk ``chunk`` (path-point major)."""

    cut: int
    chunk: int
    values: np.ndarray

    def __post_init__(self) -> None:
        require(self.cut >= 0 and self.chunk >= 0, "cut and chunk must be non-negative")
        _check_tensor(self.values)


@message(0x0B03)
@dataclass(frozen=True)
class PathGradients(Message):
    """The quadrature-weighted gradient of the score with respect to :class:`PathActivations` of the same cut."""

    cut: int
    chunk: int
    values: np.ndarray

    def __post_init__(self) -> None:
        require(self.cut >= 0 and self.chunk >= 0, "cut and chunk must be non-negative")
        _check_tensor(self.values)


@message(0x0B04)
@dataclass(frozen=True)
class GroupAttribution(Message):
    """A party with columns -> the coordinator: its group's attribution of each row of chunk ``chunk`` (``totals``)
    and, if its config allows (``k > 0``), the indices ``top (rows, k)`` of its most influential columns per row
    into ``names`` (joined by :data:`NAME_SEP`); ``k = 0`` and no names otherwise."""

    chunk: int
    totals: np.ndarray
    top: np.ndarray
    names: str

    def __post_init__(self) -> None:
        require(self.chunk >= 0, "chunk must be non-negative")
        require_array("totals", self.totals, dtype="float64", ndim=1)
        require(all_finite(self.totals), "totals must be finite")
        require_array("top", self.top, dtype="int32", ndim=2)
        rows, k = self.top.shape
        require(rows == len(self.totals), f"top has {rows} rows, totals {len(self.totals)}")
        require(k <= MAX_TOP_K, f"at most {MAX_TOP_K} names per row")
        count = len(self.names.split(NAME_SEP)) if self.names else 0
        require((k == 0) == (count == 0), "names are given exactly when top-k indices are")
        require(self.top.size == 0 or (int(self.top.min()) >= 0 and int(self.top.max()) < count),
                "top indices must point into names")


@message(0x0B05)
@dataclass(frozen=True)
class KnotActivations(Message):
    """Exact method: the output of the segment before cut ``cut`` at the knots of chunk ``chunk``'s paths:
    ``counts (rows,)`` knots per row, their positions ``alphas`` (each row's from 0 to 1, increasing) and the values
    ``(knots, width)`` there, rows one after the other."""

    cut: int
    chunk: int
    counts: np.ndarray
    alphas: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        require(self.cut >= 0 and self.chunk >= 0, "cut and chunk must be non-negative")
        require_array("counts", self.counts, dtype="int32", ndim=1)
        require(1 <= len(self.counts) <= MAX_CHUNK, f"1 to {MAX_CHUNK} rows per chunk")
        require(bool((self.counts >= 2).all()) and bool((self.counts <= MAX_KNOTS).all()),
                f"every row has 2 to {MAX_KNOTS} knots")
        require_array("alphas", self.alphas, dtype="float64", ndim=1)
        total = int(self.counts.sum(dtype=np.int64))
        require(len(self.alphas) == total <= MAX_PATH_ROWS, f"alphas must hold one position per knot, at most "
                                                            f"{MAX_PATH_ROWS}")
        require_array("values", self.values, dtype="float64", ndim=2)
        require(len(self.values) == total, "values must hold one row per knot")
        require(all_finite(self.values) and all_finite(self.alphas), "values and alphas must be finite")
        ends = np.cumsum(self.counts, dtype=np.int64)
        starts = ends - self.counts
        require(bool((self.alphas[starts] == 0).all() and (self.alphas[ends - 1] == 1).all()),
                "every row's knots run from 0 to 1")
        step = np.diff(self.alphas)
        inside = np.ones(len(step), dtype=bool)
        inside[ends[:-1] - 1] = False  # the step from one row's last knot to the next row's first
        require(bool((step[inside] > 0).all()), "knots must increase within a row")


@message(0x0B06)
@dataclass(frozen=True)
class PieceGradients(Message):
    """Exact method: the gradient of the score with respect to :class:`KnotActivations` of the same cut, integrated
    over each piece between two consecutive knots of a row (``knots - rows`` pieces, in order)."""

    cut: int
    chunk: int
    values: np.ndarray

    def __post_init__(self) -> None:
        require(self.cut >= 0 and self.chunk >= 0, "cut and chunk must be non-negative")
        require_array("values", self.values, dtype="float64", ndim=2)
        require(len(self.values) <= MAX_PATH_ROWS, f"at most {MAX_PATH_ROWS} pieces")
        require(all_finite(self.values), "values must be finite")
