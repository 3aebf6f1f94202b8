"""Stream framing: cut a byte stream into whole frames, sans-IO.

Theory of operation. A stream channel (TLS or, in tests, plain TCP) carries frames back to back, each behind a
4-byte little-endian length prefix. A zero length is a heartbeat: it carries nothing, proves the peer is alive
and is never handed to the caller (codec frames are never empty). The :class:`Deframer` checks every declared
length against the frame-size cap *before* it keeps more bytes, so a peer that declares 2 GiB gets a
:class:`~vsplit.errors.TransportError` and costs no memory. A frame's buffer is allocated at once up to
:data:`EAGER_BYTES` and beyond that doubles only as its bytes actually arrive, so a peer that declares a large
frame and sends nothing costs at most 1 MiB.

The record layer writes plaintext straight into the frame being assembled (:meth:`Deframer.space`, then
:meth:`Deframer.commit`): a frame is decrypted where it will be read, with no piece copied in between.
:meth:`Deframer.feed` does the same from bytes already in memory.

Example:
    >>> wire = prefix(b"hello") + b"hello" + HEARTBEAT + prefix(b"!") + b"!"
    >>> d = Deframer(max_frame=1024)
    >>> [bytes(f) for f in d.feed(wire[:7])], [bytes(f) for f in d.feed(wire[7:])]
    ([], [b'hello', b'!'])
    >>> d.heartbeats, d.at_boundary
    (1, True)
"""

from __future__ import annotations

import struct

from vsplit.errors import TransportError

#: Largest frame a stream channel accepts unless configured otherwise: 64 MiB.
DEFAULT_MAX_FRAME = 64 * 1024 * 1024
#: Largest cap a 4-byte prefix can express.
PREFIX_LIMIT = 2**32 - 1
_PREFIX = struct.Struct("<I")
PREFIX_SIZE = _PREFIX.size
#: The control frame sent when a channel is idle; the receiver drops it.
HEARTBEAT = _PREFIX.pack(0)
#: A frame's buffer is allocated whole up to this size; a larger one doubles as its bytes arrive.
EAGER_BYTES = 1 << 20


def prefix(frame: bytes | bytearray | memoryview | int) -> bytes:
    """The 4-byte little-endian length prefix for ``frame`` (or for a frame of that many bytes).

    >>> prefix(b"abc"), prefix(3)
    (b'\\x03\\x00\\x00\\x00', b'\\x03\\x00\\x00\\x00')
    """
    size = frame if isinstance(frame, int) else len(frame)
    if size > PREFIX_LIMIT:
        raise TransportError(f"frame of {size} bytes is too long for a stream channel")
    return _PREFIX.pack(size)


class Deframer:
    """Reassembles length-prefixed frames from arbitrarily split chunks of a stream.

    ``feed`` returns the frames completed by the new bytes (heartbeats dropped and counted). After a
    :class:`TransportError` the stream is out of step and every later ``feed`` raises again.

    >>> Deframer(max_frame=100).feed(b"\\x00\\x00\\x00\\x80")
    Traceback (most recent call last):
    ...
    vsplit.errors.TransportError: peer declared a frame of 2147483648 bytes, over the cap of 100 bytes; \
refusing it (raise max_frame on both sides if frames this large are expected)
    """

    def __init__(self, *, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if not 0 < max_frame <= PREFIX_LIMIT:
            raise ValueError(f"max_frame must be in 1..{PREFIX_LIMIT}, got {max_frame}")
        self.max_frame = max_frame
        self.heartbeats = 0
        self._head = bytearray(PREFIX_SIZE)
        self._body = bytearray()
        self._got = 0  # bytes of the prefix (while _need is None) or of the body received so far
        self._need: int | None = None  # body length of the frame being assembled, once its prefix is read
        self._error: TransportError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return self._got

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is pending (a clean place for the stream to end)."""
        return not self._got and self._need is None

    def space(self) -> memoryview:
        """Where the stream's next bytes go: write up to ``len()`` bytes into it, then :meth:`commit` how many.

        Example:
            >>> d = Deframer(max_frame=16)
            >>> wire = memoryview(prefix(b"hi") + b"hi")
            >>> while wire:
            ...     room = d.space()
            ...     n = min(len(room), len(wire))
            ...     room[:n] = wire[:n]
            ...     wire, frame = wire[n:], d.commit(n)
            >>> bytes(frame)
            b'hi'
        """
        if self._error is not None:
            raise self._error
        if self._need is None:
            return memoryview(self._head)[self._got :]
        if self._got == len(self._body):  # a large frame outgrew its buffer: double it, never past the frame
            grown = bytearray(min(self._need, 2 * len(self._body)))
            grown[: self._got] = self._body
            self._body = grown
        return memoryview(self._body)[self._got :]

    def commit(self, n: int) -> bytearray | None:
        """``n`` bytes were written into the last :meth:`space`; return the frame they complete, if any."""
        self._got += n
        if self._need is None:
            if self._got < PREFIX_SIZE:
                return None
            (length,) = _PREFIX.unpack(self._head)
            self._got = 0
            if length == 0:
                self.heartbeats += 1
                return None
            if length > self.max_frame:
                self._error = TransportError(
                    f"peer declared a frame of {length} bytes, over the cap of {self.max_frame} bytes; "
                    "refusing it (raise max_frame on both sides if frames this large are expected)"
                )
                raise self._error
            self._need = length
            self._body = bytearray(min(length, EAGER_BYTES))
            return None
        if self._got < self._need:
            return None
        frame, self._body = self._body, bytearray()
        self._got, self._need = 0, None
        return frame

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Add ``data`` from the stream; return the frames it completes, in order."""
        out: list[bytearray] = []
        view = memoryview(data).cast("B")
        while True:
            room = self.space()  # raises again once the stream is out of step
            if not view:
                return out
            n = min(len(room), len(view))
            room[:n] = view[:n]
            view = view[n:]
            if (frame := self.commit(n)) is not None:
                out.append(frame)


__all__ = ["DEFAULT_MAX_FRAME", "EAGER_BYTES", "HEARTBEAT", "PREFIX_SIZE", "Deframer", "prefix"]
