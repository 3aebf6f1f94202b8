"""The scorecard messages (type codes 0x0F01-0x0F09). Each checks its own shape; none from the label party carries
a label, a residual or any per-row value in the clear.

Training: the label party sends :class:`ScoreHello` (its public key, the settings, the fixed point); each partner
answers :class:`ScoreReady` (its number of attributes) and, every step, :class:`LinearScores` (its per-row linear
score ``u_p``, as the split network's partners send embeddings). The label party sends :class:`Residuals` (one
ciphertext a row); the partner answers :class:`MaskedGradient` (one ciphertext per attribute: its gradient sum plus a
random mask); the label party decrypts and returns :class:`Unmasked` (the masked sums, still masked); after the
last step each partner sends :class:`PartnerCard` (what it shows in the model card). Scoring:
:class:`PointsAsk` (how many aligned rows) and :class:`PartnerPoints` (each row's points from the partner, and, if it
shares reason codes, its attributes that cost the row most).

Example:
    >>> import numpy as np
    >>> LinearScores(step=0, values=np.zeros(3)).values.tolist()
    [0.0, 0.0, 0.0]
    >>> Unmasked(step=0, values=np.zeros((2, 3), np.uint8))
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: Unmasked.values: expected (attributes, 32) bytes, got (2, 3)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vsplit.he import MAX_MESSAGE_BYTES
from vsplit.protocol.message import Message, message, require, require_array

VERSION = 1
#: the most aligned rows one run takes
MAX_ROWS = 1 << 24
MAX_ATTRIBUTES = 10_000
MAX_STEPS = 10_000
#: bytes of one masked sum on the wire: a signed 256-bit big-endian integer
INT_BYTES = 32
_CIPHER_HEADER = 19  # b"VHC1", fingerprint, scheme, count, width (vsplit.he.wire)


def _frame(owner: str, frame: np.ndarray) -> None:
    require_array(f"{owner}.frame", frame, dtype="uint8", ndim=1)
    require(_CIPHER_HEADER < len(frame) <= MAX_MESSAGE_BYTES and bytes(frame[:4]) == b"VHC1",
            f"{owner}.frame: {len(frame)} bytes, not a ciphertext message")


def _step(owner: str, step: int) -> None:
    require(0 <= step < MAX_STEPS, f"{owner}.step out of range: {step}")


def _per_row(owner: str, name: str, value: np.ndarray, dtype: str, ndim: int = 1) -> None:
    require_array(f"{owner}.{name}", value, dtype=dtype, ndim=ndim)
    require(0 < len(value) <= MAX_ROWS, f"{owner}.{name}: {len(value)} rows, not 1..{MAX_ROWS}")


def ints_to_bytes(values: list[int]) -> np.ndarray:
    """Signed integers as ``(len, INT_BYTES)`` uint8, big-endian two's complement.

    Example:
        >>> bytes_to_ints(ints_to_bytes([-3, 2**200])) == [-3, 2**200]
        True
    """
    return np.array([list(int(v).to_bytes(INT_BYTES, "big", signed=True)) for v in values],
                    dtype=np.uint8).reshape(-1, INT_BYTES)


def bytes_to_ints(values: np.ndarray) -> list[int]:
    """Back from :func:`ints_to_bytes`."""
    return [int.from_bytes(row.tobytes(), "big", signed=True) for row in values]


@message(0x0F01)
@dataclass(frozen=True)
class ScoreHello(Message):
    """The label party's public key message (:meth:`vsplit.he.PublicKey.to_bytes`), settings and fixed point."""

    version: int
    rows: int
    iterations: int
    learning_rate: float
    l2: float
    residual_scale: int
    woe_scale: int
    base_score: float
    base_odds: float
    pdo: float
    key: np.ndarray

    def __post_init__(self) -> None:
        require(0 < self.rows <= MAX_ROWS, f"ScoreHello.rows out of range: {self.rows}")
        require(0 < self.iterations <= MAX_STEPS, f"ScoreHello.iterations out of range: {self.iterations}")
        require(0 < self.learning_rate <= 100 and 0 <= self.l2 <= 1e6, "ScoreHello: learning rate or l2 out of range")
        require(1 <= self.residual_scale <= 2**30 and 1 <= self.woe_scale <= 2**30, "ScoreHello: a scale out of range")
        require(all(np.isfinite([self.base_score, self.base_odds, self.pdo])) and self.base_odds > 0 and self.pdo > 0,
                "ScoreHello: base score, base odds or pdo out of range")
        require_array("ScoreHello.key", self.key, dtype="uint8", ndim=1)
        require(0 < len(self.key) <= 8192, f"ScoreHello.key: {len(self.key)} bytes")


@message(0x0F02)
@dataclass(frozen=True)
class ScoreReady(Message):
    """A partner's shape: how many attributes it trains (nothing of their names, bins or values)."""

    attributes: int

    def __post_init__(self) -> None:
        require(1 <= self.attributes <= MAX_ATTRIBUTES, f"ScoreReady.attributes out of range: {self.attributes}")


@message(0x0F03)
@dataclass(frozen=True)
class LinearScores(Message):
    """The partner's per-row linear score at step ``step`` (its WOE matrix times its look-ahead coefficients)."""

    step: int
    values: np.ndarray

    def __post_init__(self) -> None:
        _step("LinearScores", self.step)
        _per_row("LinearScores", "values", self.values, "float64")
        require(bool(np.isfinite(self.values).all()), "LinearScores.values: NaN or infinite")


@message(0x0F04)
@dataclass(frozen=True)
class Residuals(Message):
    """Step ``step``'s residuals ``sigmoid(z) - y``, fixed point, one ciphertext a row."""

    step: int
    frame: np.ndarray

    def __post_init__(self) -> None:
        _step("Residuals", self.step)
        _frame("Residuals", self.frame)


@message(0x0F05)
@dataclass(frozen=True)
class MaskedGradient(Message):
    """One ciphertext per partner attribute: its gradient sum (per bin: WOE times the bin's residual sum) plus a
    random mask only the partner knows."""

    step: int
    frame: np.ndarray

    def __post_init__(self) -> None:
        _step("MaskedGradient", self.step)
        _frame("MaskedGradient", self.frame)


@message(0x0F06)
@dataclass(frozen=True)
class Unmasked(Message):
    """The decrypted masked sums of step ``step`` (still masked), as signed 256-bit integers."""

    step: int
    values: np.ndarray

    def __post_init__(self) -> None:
        _step("Unmasked", self.step)
        require_array("Unmasked.values", self.values, dtype="uint8", ndim=2)
        require(self.values.shape[1] == INT_BYTES and 0 < len(self.values) <= MAX_ATTRIBUTES,
                f"Unmasked.values: expected (attributes, {INT_BYTES}) bytes, got {self.values.shape}")


@message(0x0F09)
@dataclass(frozen=True)
class PartnerCard(Message):
    """After the last step: what a partner chose to show in the label party's model card, as JSON (its number of
    attributes; its attribute names and its points table only if it shares them)."""

    text: str

    def __post_init__(self) -> None:
        require(0 < len(self.text) <= 1 << 20, f"PartnerCard.text: {len(self.text)} characters, not 1..2**20")


@message(0x0F07)
@dataclass(frozen=True)
class PointsAsk(Message):
    """Scoring: the points of the ``rows`` aligned rows, and up to ``reasons`` reason codes a row."""

    rows: int
    reasons: int = 0

    def __post_init__(self) -> None:
        require(0 < self.rows <= MAX_ROWS, f"PointsAsk.rows out of range: {self.rows}")
        require(0 <= self.reasons <= 16, f"PointsAsk.reasons out of range: {self.reasons}")


@message(0x0F08)
@dataclass(frozen=True)
class PartnerPoints(Message):
    """Each row's points from the partner; if it shares reason codes, per row its attributes that cost most
    (``attributes``: its own attribute indices, -1 for none) and the points each cost (``lost``); if it shares its
    attribute names, ``names`` (one a line, in index order)."""

    points: np.ndarray
    attributes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int32))
    lost: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float64))
    names: str = ""

    def __post_init__(self) -> None:
        _per_row("PartnerPoints", "points", self.points, "float64")
        require(bool(np.isfinite(self.points).all()), "PartnerPoints.points: NaN or infinite")
        require_array("PartnerPoints.attributes", self.attributes, dtype="int32", ndim=2)
        require_array("PartnerPoints.lost", self.lost, dtype="float64", ndim=2)
        require(self.attributes.shape == self.lost.shape and self.attributes.shape[1] <= 16,
                "PartnerPoints: attributes and lost of different shapes, or more than 16 reasons a row")
        require(not self.attributes.size or (len(self.attributes) == len(self.points)
                                             and int(self.attributes.min()) >= -1
                                             and bool(np.isfinite(self.lost).all())),
                "PartnerPoints: reason codes for other rows, or out of range")
        require(len(self.names) <= 1 << 20, "PartnerPoints.names: over 1 MiB")
