"""The messages of joint explanation (integrated gradients through the cuts). Type codes 0x0B01-0x0BFF.

What crosses, and why: the coordinator (the label party) asks for an explanation of ``n_rows`` aligned rows with a
path of ``steps`` points (:class:`ExplainRequest`); every cut then carries, per chunk of rows, the outputs of the
segment before it at every path point (:class:`PathActivations`: the tensors scoring sends, for the interpolated
rows between the sender's baseline and each row) and back the gradient of the score with respect to them
(:class:`PathGradients`: the tensors training sends). A party with columns of its own then tells the coordinator one
number per row, its group's attribution (:class:`GroupAttribution`), and, only if its config allows, the names of its
``k`` most influential columns per row: never its per-feature attributions, values or baseline.

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


@message(0x0B01)
@dataclass(frozen=True)
class ExplainRequest(Message):
    """Coordinator -> every other party: explain ``n_rows`` aligned rows, ``chunk`` rows at a time, with ``steps``
    quadrature nodes (:func:`vsplit.explain.paths.path_points`); ``topology``: the coordinator's fingerprint."""

    n_rows: int
    chunk: int
    steps: int
    topology: str

    def __post_init__(self) -> None:
        require(self.n_rows >= 0, "n_rows must be non-negative")
        require(1 <= self.chunk <= MAX_CHUNK, f"chunk must be 1 to {MAX_CHUNK}")
        require(1 <= self.steps <= 512, "steps must be 1 to 512")
        require(self.chunk * (self.steps + 2) <= MAX_PATH_ROWS,
                f"chunk x (steps + 2) must be at most {MAX_PATH_ROWS} path rows; lower explain.chunk")
        require(0 < len(self.topology) <= 64, "topology fingerprint must be 1 to 64 characters")


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
