"""The PSI messages (type codes 0x0201-0x0206). Each checks its own shape; none carries an ID or an ID's hash.

A pair's exchange: both send :class:`Hello`; both stream their blinded IDs as :class:`Blinded` chunks; the peer
answers each chunk with :class:`Doubled` (the chunk blinded again, same order) when the sender may learn the
overlap, else with :class:`Ack`; where a partner is told its rows, the label party sends :class:`Selected` chunks.
A side that lost the scalars of unfinished buckets (a worker node died) sends :class:`Redo`: both sides then redo
those buckets with fresh scalars.

Example:
    >>> import numpy as np
    >>> Blinded(index=0, total=1, points=np.zeros((1, 32), np.uint8)).points.shape
    (1, 32)
    >>> Ack(index=-1)
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: Ack.index must be >= 0, got -1
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.protocol.message import Message, message, require, require_array
from vsplit.psi.buckets import MAX_BUCKETS
from vsplit.psi.config import MAX_CHUNK

#: The largest set size a peer may announce (far above any real table; bounds what a peer can make us allocate).
MAX_TOTAL = 1 << 40
ROLES = ("label", "partner")


def _index(owner: str, index: int) -> None:
    require(0 <= index < MAX_TOTAL, f"{owner}.index must be >= 0, got {index}")


def _bucket(owner: str, bucket: int) -> None:
    require(0 <= bucket < MAX_BUCKETS, f"{owner}.bucket must be in 0..{MAX_BUCKETS - 1}, got {bucket}")


def _points(owner: str, points: np.ndarray) -> None:
    require_array(f"{owner}.points", points, dtype="uint8", ndim=2, width=32)
    require(0 < len(points) <= MAX_CHUNK, f"{owner} carries {len(points)} points, not 1..{MAX_CHUNK}")


@message(0x0201)
@dataclass(frozen=True)
class Hello(Message):
    """Opens a pair's session: versions, settings that must agree, and a fresh nonce for the salt."""

    version: int
    role: str
    reveal: str
    parties: int
    normalisation: str
    binding: np.ndarray
    nonce: np.ndarray
    buckets: int = 1
    #: this side's scalars may be lost (they live on other nodes), so it may send :class:`Redo`
    redo: bool = False
    #: a rerun's tag of the interrupted session it kept (hex of a hash of its salt; ``""``: none) and how many of its
    #: leading buckets this side finished then (:mod:`vsplit.psi.resume`)
    resume: str = ""
    done: int = 0

    def __post_init__(self) -> None:
        require(self.role in ROLES, f"Hello.role must be one of {ROLES}, got {self.role!r}")
        require(1 <= self.buckets <= MAX_BUCKETS, f"Hello.buckets out of range: {self.buckets}")
        require(len(self.reveal) <= 32 and len(self.normalisation) <= 128, "Hello: settings text too long")
        require(0 <= self.parties <= 1024, f"Hello.parties out of range: {self.parties}")
        require_array("Hello.binding", self.binding, dtype="uint8", ndim=1, width=32)
        require_array("Hello.nonce", self.nonce, dtype="uint8", ndim=1, width=32)
        require(self.resume == "" or (len(self.resume) == 64 and all(c in "0123456789abcdef" for c in self.resume)),
                "Hello.resume must be empty or 64 lowercase hex digits")
        require(0 <= self.done <= self.buckets, f"Hello.done out of range 0..{self.buckets}: {self.done}")


@message(0x0202)
@dataclass(frozen=True)
class Blinded(Message):
    """Chunk ``index`` of the sender's IDs, hashed and blinded once, in the sender's shuffled order.

    ``total`` is the number of points the sender sends in all, dummies included: ``buckets`` times the padded
    bucket size. ``bucket`` tags the bucket the chunk belongs to; a chunk never spans two. Chunks are never empty:
    a party without IDs aborts with ``NO_OVERLAP`` instead of sending.
    """

    index: int
    total: int
    points: np.ndarray
    bucket: int = 0

    def __post_init__(self) -> None:
        _index("Blinded", self.index)
        _bucket("Blinded", self.bucket)
        require(0 < self.total < MAX_TOTAL, f"Blinded.total out of range: {self.total}")
        _points("Blinded", self.points)


@message(0x0203)
@dataclass(frozen=True)
class Doubled(Message):
    """The receiver's chunk ``index`` blinded a second time, in the order it was sent."""

    index: int
    points: np.ndarray
    bucket: int = 0

    def __post_init__(self) -> None:
        _index("Doubled", self.index)
        _bucket("Doubled", self.bucket)
        _points("Doubled", self.points)


@message(0x0204)
@dataclass(frozen=True)
class Ack(Message):
    """Chunk ``index`` was processed, and its double-blinded values stay with the sender of this Ack."""

    index: int
    bucket: int = 0

    def __post_init__(self) -> None:
        _index("Ack", self.index)
        _bucket("Ack", self.bucket)


@message(0x0205)
@dataclass(frozen=True)
class Selected(Message):
    """Chunk ``index`` of the rows the receiver must use, in the agreed order, as positions in its sent order."""

    index: int
    total: int
    positions: np.ndarray

    def __post_init__(self) -> None:
        _index("Selected", self.index)
        require(0 < self.total < MAX_TOTAL, f"Selected.total out of range: {self.total}")
        require_array("Selected.positions", self.positions, dtype="int64", ndim=1)
        require(
            0 < len(self.positions) <= MAX_CHUNK,
            f"Selected carries {len(self.positions)} positions, not 1..{MAX_CHUNK}",
        )
        require(bool((self.positions >= 0).all()), "Selected.positions must be >= 0")


@message(0x0206)
@dataclass(frozen=True)
class Redo(Message):
    """Redo bucket ``bucket`` and every later one with fresh scalars; what either side sent for them is void.

    Sent by a side that lost the scalars of an unfinished bucket, and echoed by the peer as the marker after which
    its own messages for those buckets are new (:mod:`vsplit.psi.exchange`).
    """

    bucket: int

    def __post_init__(self) -> None:
        _bucket("Redo", self.bucket)
