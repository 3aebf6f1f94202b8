"""Numbered frames, acknowledgements and the resend buffer of a resumable channel, sans-IO.

Theory of operation. :class:`~vsplit.transport.resume.ResumableChannel` wraps every frame it sends in an
*envelope* that carries a number, and keeps the envelope until the peer says it has it. This module holds that
bookkeeping without any sockets, threads or clocks, so it can be tested one call at a time:

* Envelopes (all integers u64 little-endian, after a 1-byte kind)::

      DATA     kind=1 | seq | ack | payload (at least 1 byte)
      GOODBYE  kind=2 | seq | ack                 the sender's last numbered frame: a clean close
      ACK      kind=3 | ack                       "I have every frame below ack"
      RESUME   kind=4 | "VSRESUM1" | token 16 B | received

  ``seq`` numbers DATA and GOODBYE frames 0, 1, 2, ... per direction; ``ack`` (also piggybacked on every DATA and
  GOODBYE) is the number of frames the sender has received in order. RESUME opens every connection of a resumable
  channel: ``token`` names the channel (chosen by the dialing side at the first connection) and ``received`` says
  where the peer must resume. :func:`parse` accepts exactly these layouts and nothing else.
* :class:`Outbox` numbers outgoing frames and keeps each until it is acknowledged, within a byte budget (one frame
  always fits); after a reconnection, :meth:`Outbox.resume` drops what the peer has and returns the rest to resend.
* :class:`Inbound` accepts frames in order: a number below the next expected one is a duplicate (dropped), above
  it a gap, which cannot happen over an ordered stream and is refused as a protocol violation.

Example:
    >>> out, inb = Outbox(limit=1 << 20), Inbound()
    >>> first = b"".join(out.add(lambda seq: data_head(seq, 0), b"hello"))
    >>> env = parse(first)
    >>> inb.accept(env.seq), first[OVERHEAD:], inb.accept(env.seq)  # the second copy is a duplicate
    (True, b'hello', False)
    >>> [parse(b"".join(e)).seq for e in out.resume(inb.received)]  # the peer has frame 0: nothing to resend
    []
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from vsplit.errors import ProtocolError

DATA, GOODBYE, ACK, RESUME = 1, 2, 3, 4
_NUMBERED = struct.Struct("<BQQ")
_ACK = struct.Struct("<BQ")
_RESUME = struct.Struct("<B8s16sQ")
_RESUME_MAGIC = b"VSRESUM1"
#: Bytes an envelope adds in front of a DATA payload.
OVERHEAD = _NUMBERED.size
#: Length of a channel token.
TOKEN_BYTES = 16
#: The token a listener announces for a party it has no channel with yet.
NO_TOKEN = bytes(TOKEN_BYTES)


@dataclass(frozen=True)
class Envelope:
    """One parsed envelope; fields that a kind does not carry are 0 (or empty).

    The payload of a DATA envelope is ``frame[OVERHEAD:]``; for RESUME, ``seq`` holds the peer's ``received``.
    """

    kind: int
    seq: int = 0
    ack: int = 0
    token: bytes = b""


def data(seq: int, ack: int, payload: bytes | bytearray | memoryview) -> bytes:
    """A DATA envelope around ``payload``."""
    return data_head(seq, ack) + payload


def data_head(seq: int, ack: int) -> bytes:
    """The header of a DATA envelope: the envelope is this followed by the payload (:data:`OVERHEAD` bytes)."""
    return _NUMBERED.pack(DATA, seq, ack)


def goodbye(seq: int, ack: int) -> bytes:
    """The GOODBYE envelope: frame ``seq`` is the sender's last."""
    return _NUMBERED.pack(GOODBYE, seq, ack)


def ack(received: int) -> bytes:
    """An ACK envelope: the sender holds every frame numbered below ``received``."""
    return _ACK.pack(ACK, received)


def resume(token: bytes, received: int) -> bytes:
    """The RESUME envelope that opens a connection of channel ``token``.

    >>> env = parse(resume(b"t" * 16, 5))
    >>> env.kind == RESUME, env.token, env.seq
    (True, b'tttttttttttttttt', 5)
    """
    if len(token) != TOKEN_BYTES:
        raise ValueError(f"a channel token has {TOKEN_BYTES} bytes, got {len(token)}")
    return _RESUME.pack(RESUME, _RESUME_MAGIC, token, received)


def parse(frame: bytes | bytearray) -> Envelope:
    """Parse one envelope; :class:`ProtocolError` unless it is exactly one of the layouts above.

    >>> parse(b"\\x03" + bytes(7))
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: malformed resumable-channel envelope (kind 3, 8 bytes)
    """
    size = len(frame)
    kind = frame[0] if size else -1
    if kind == DATA and size > _NUMBERED.size:
        return Envelope(DATA, *_NUMBERED.unpack_from(frame)[1:])
    if kind == GOODBYE and size == _NUMBERED.size:
        return Envelope(GOODBYE, *_NUMBERED.unpack_from(frame)[1:])
    if kind == ACK and size == _ACK.size:
        return Envelope(ACK, ack=_ACK.unpack_from(frame)[1])
    if kind == RESUME and size == _RESUME.size:
        _, magic, token, received = _RESUME.unpack_from(frame)
        if magic == _RESUME_MAGIC:
            return Envelope(RESUME, seq=received, token=token)
    raise ProtocolError(f"malformed resumable-channel envelope (kind {kind}, {size} bytes)")


#: An envelope as it is kept and sent: its head, then its body (a DATA envelope's payload, kept without a copy).
Parts = tuple[bytes, "bytes | bytearray"]


class Outbox:
    """Numbers outgoing frames and keeps them until acknowledged, within ``limit`` bytes (one always fits).

    An envelope is kept as two parts, its head and its body, so a large payload is neither copied into an envelope
    nor copied to be kept: the caller must not change a payload after handing it over.

    >>> box = Outbox(limit=10)
    >>> box.room_for(100)  # empty: one frame always fits
    True
    >>> head, body = box.add(lambda seq: data_head(seq, 0), b"x" * 100)
    >>> len(head) + len(body), box.room_for(1), parse(head + body).seq
    (117, False, 0)
    >>> box.acknowledge(1); box.nbytes, box.room_for(100)
    (0, True)
    """

    def __init__(self, *, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"limit must be positive, got {limit}")
        self.limit = limit
        #: The number the next frame gets.
        self.next_seq = 0
        #: Every frame below this number is acknowledged (and dropped from the buffer).
        self.acked = 0
        self.nbytes = 0
        self._kept: deque[tuple[int, Parts]] = deque()

    def room_for(self, size: int) -> bool:
        """Whether a frame of ``size`` bytes may be added now."""
        return not self._kept or self.nbytes + size <= self.limit

    def add(self, head: Callable[[int], bytes], body: bytes | bytearray = b"") -> Parts:
        """Number a frame: ``head(seq)`` builds its envelope's head (a whole envelope when ``body`` is empty); the
        parts are kept for resending and returned."""
        seq = self.next_seq
        parts = (head(seq), body)
        self._kept.append((seq, parts))
        self.nbytes += len(parts[0]) + len(body)
        self.next_seq = seq + 1
        return parts

    @property
    def unacknowledged(self) -> int:
        """How many numbered frames the peer has not acknowledged yet."""
        return self.next_seq - self.acked

    def acknowledge(self, received: int) -> None:
        """The peer holds every frame below ``received``: drop them. A stale (lower) ack changes nothing."""
        if received > self.next_seq:
            raise ProtocolError(f"peer acknowledged frame {received - 1}, but only {self.next_seq} were sent")
        while self._kept and self._kept[0][0] < received:
            head, body = self._kept.popleft()[1]
            self.nbytes -= len(head) + len(body)
        self.acked = max(self.acked, received)

    def resume(self, received: int) -> list[Parts]:
        """After a reconnection the peer says it holds every frame below ``received``: the envelopes to resend."""
        if received < self.acked:
            raise ProtocolError(
                f"peer resumes at frame {received} but had acknowledged {self.acked}: it is not the same session"
            )
        self.acknowledge(received)
        return [parts for _, parts in self._kept]


class Inbound:
    """Accepts incoming numbered frames exactly once and in order."""

    def __init__(self) -> None:
        #: Frames received in order (the number of the next frame expected).
        self.received = 0
        #: Copies of frames already received, dropped.
        self.duplicates = 0

    def accept(self, seq: int) -> bool:
        """True if frame ``seq`` is the next one (deliver it), False for a duplicate; a gap raises.

        >>> inb = Inbound(); inb.accept(0), inb.accept(0), inb.received
        (True, False, 1)
        >>> inb.accept(5)
        Traceback (most recent call last):
        ...
        vsplit.errors.ProtocolError: frame 5 arrived while 1 was expected: frames 1..4 are missing
        """
        if seq < self.received:
            self.duplicates += 1
            return False
        if seq > self.received:
            raise ProtocolError(
                f"frame {seq} arrived while {self.received} was expected: frames {self.received}..{seq - 1} are missing"
            )
        self.received += 1
        return True


__all__ = ["ACK", "DATA", "GOODBYE", "NO_TOKEN", "OVERHEAD", "RESUME", "TOKEN_BYTES", "Envelope", "Inbound",
           "Outbox", "Parts", "ack", "data", "data_head", "goodbye", "parse", "resume"]
