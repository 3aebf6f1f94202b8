"""The messages of secure aggregation (type codes 0x0601-0x0604) and their size-checked encode and decode.

One aggregation: every client sends its :class:`PublicKey` to the federated server; the server relays all of them
in a :class:`Roster` (attempt 0); each member answers with its :class:`MaskedInput`; the server sends the
:class:`AggregateResult` (the row-weighted mean) to the members. When a member drops before its masked input
arrives, the server sends a new :class:`Roster` of the survivors with the next attempt number and the survivors
mask again. No field carries an unmasked value of one client.

Frames use the project codec (:mod:`vsplit.transport.codec`: fixed header, raw little-endian buffers, never
pickle). :func:`decode_frame` reads the fixed header, refuses any other message type and any frame longer than
the largest valid one of its type for the agreed vector length before decoding the rest; the codec then refuses
truncated frames and trailing bytes.

Example:
    >>> import numpy as np
    >>> frame = encode_frame(PublicKey(round=0, key=np.zeros(32, np.uint8)), session=b"s" * 16, seq=0)
    >>> decode_frame(frame, length=10, clients=3).round
    0
    >>> decode_frame(frame[:-1], length=10, clients=3)
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: PublicKey.key: shape (32,) needs 32 bytes, frame has 31
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.abort import Abort
from vsplit.protocol.message import Message, all_finite, lookup, message, require, require_array
from vsplit.transport.codec import HEADER_SIZE, decode_body, decode_header, encode, layout_of

#: The most clients one aggregation takes, and the longest vector (a bound on what a peer can make us allocate).
MAX_CLIENTS = 1024
MAX_LENGTH = 1 << 27
KEY_BYTES = 32


def _counters(owner: str, round_: int, attempt: int = 0) -> None:
    require(0 <= round_ < 1 << 40, f"{owner}.round out of range: {round_}")
    require(0 <= attempt <= MAX_CLIENTS, f"{owner}.attempt out of range: {attempt}")


@message(0x0601)
@dataclass(frozen=True)
class PublicKey(Message):
    """Client -> server: the client's X25519 public key for this round."""

    round: int
    key: np.ndarray

    def __post_init__(self) -> None:
        _counters("PublicKey", self.round)
        require_array("PublicKey.key", self.key, dtype="uint8", ndim=1, width=KEY_BYTES)


@message(0x0602)
@dataclass(frozen=True)
class Roster(Message):
    """Server -> each member: who takes part in this attempt (client indices, ascending) and their public keys."""

    round: int
    attempt: int
    members: np.ndarray
    keys: np.ndarray

    def __post_init__(self) -> None:
        _counters("Roster", self.round, self.attempt)
        require_array("Roster.members", self.members, dtype="int64", ndim=1)
        require_array("Roster.keys", self.keys, dtype="uint8", ndim=2, width=KEY_BYTES)
        require(1 <= len(self.members) <= MAX_CLIENTS, f"Roster: {len(self.members)} members, not 1..{MAX_CLIENTS}")
        require(len(self.keys) == len(self.members), "Roster: one key per member")
        require(bool((self.members >= 0).all()) and bool((np.diff(self.members) > 0).all()),
                "Roster.members must be distinct non-negative indices in ascending order")


@message(0x0603)
@dataclass(frozen=True)
class MaskedInput(Message):
    """Member -> server: ``encode(w_i x_i) + masks`` modulo 2^k (uint64 bit patterns carried as int64), the last
    word the masked row count."""

    round: int
    attempt: int
    values: np.ndarray

    def __post_init__(self) -> None:
        _counters("MaskedInput", self.round, self.attempt)
        require_array("MaskedInput.values", self.values, dtype="int64", ndim=1)
        require(2 <= len(self.values) <= MAX_LENGTH + 1, f"MaskedInput: {len(self.values)} words out of range")


@message(0x0604)
@dataclass(frozen=True)
class AggregateResult(Message):
    """Server -> members: the row-weighted mean the attempt produced, and the total rows behind it."""

    round: int
    attempt: int
    total_weight: int
    values: np.ndarray

    def __post_init__(self) -> None:
        _counters("AggregateResult", self.round, self.attempt)
        require(self.total_weight >= 1, "AggregateResult.total_weight must be >= 1")
        require_array("AggregateResult.values", self.values, dtype="float64", ndim=1)
        require(1 <= len(self.values) <= MAX_LENGTH, f"AggregateResult: {len(self.values)} values out of range")
        require(all_finite(self.values), "AggregateResult.values must be finite")


MESSAGES: tuple[type[Message], ...] = (PublicKey, Roster, MaskedInput, AggregateResult, Abort)


def max_frame_bytes(cls: type[Message], *, length: int, clients: int) -> int:
    """The exact size of the largest valid frame of message type ``cls`` for vectors of ``length`` values and
    ``clients`` clients (its fixed meta part plus its arrays at their largest)."""
    arrays = {
        PublicKey: KEY_BYTES,
        Roster: (8 + KEY_BYTES) * clients,
        MaskedInput: 8 * (length + 1),
        AggregateResult: 8 * length,
        Abort: 0,
    }[cls]
    return HEADER_SIZE + layout_of(cls).fixed.size + arrays


def encode_frame(msg: Message, *, session: bytes, seq: int) -> bytearray:
    """One frame for ``msg`` (the project codec; no pickle)."""
    return encode(msg, session=session, seq=seq)


def decode_frame(frame: bytes | bytearray | memoryview, *, length: int, clients: int) -> Message:
    """Decode a peer's frame into a secure-aggregation message, refusing oversized frames before reading them.

    Raises:
        ProtocolError: the frame is longer than any valid one, is truncated, carries trailing bytes or another
            message type, or its vector is not ``length`` (+1 for a masked input) long.
    """
    header = decode_header(frame)  # reads the fixed 36 bytes only
    cls = lookup(header.type_code)
    if cls not in MESSAGES:
        raise ProtocolError(f"{cls.__name__} is not a secure aggregation message")
    limit = max_frame_bytes(cls, length=length, clients=clients)
    if len(frame) > limit:
        raise ProtocolError(f"{cls.__name__} frame of {len(frame)} bytes is over the {limit} bytes allowed")
    msg = decode_body(header, frame)
    if isinstance(msg, MaskedInput):
        require(len(msg.values) == length + 1, f"MaskedInput carries {len(msg.values)} words, not {length + 1}")
    if isinstance(msg, AggregateResult):
        require(len(msg.values) == length, f"AggregateResult carries {len(msg.values)} values, not {length}")
    if isinstance(msg, Roster):
        require(len(msg.members) <= clients and int(msg.members[-1]) < clients, "Roster names unknown clients")
    return msg
