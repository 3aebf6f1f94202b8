"""Stream framing: cut a byte stream into whole frames, sans-IO.

Theory of operation. A stream channel (TLS or, in tests, plain TCP) carries frames back to back, each behind a
4-byte little-endian length prefix. A zero length is a heartbeat: it carries nothing, proves the peer is alive
and is never handed to the caller (codec frames are never empty). The :class:`Deframer` checks every declared
length against the frame-size cap *before* it keeps more bytes, so a peer that declares 2 GiB gets a
:class:`~vsplit.errors.TransportError` and costs no memory; a frame only grows as its bytes actually arrive.

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
        self._buf = bytearray()
        self._need: int | None = None  # body length of the frame being assembled, once its prefix is read
        self._error: TransportError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is pending (a clean place for the stream to end)."""
        return not self._buf and self._need is None

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Add ``data`` from the stream; return the frames it completes, in order."""
        if self._error is not None:
            raise self._error
        out: list[bytearray] = []
        view = memoryview(data)
        while view:
            if self._need is None:
                take = min(PREFIX_SIZE - len(self._buf), len(view))
                self._buf += view[:take]
                view = view[take:]
                if len(self._buf) < PREFIX_SIZE:
                    break
                (length,) = _PREFIX.unpack(self._buf)
                self._buf.clear()
                if length == 0:
                    self.heartbeats += 1
                    continue
                if length > self.max_frame:
                    self._error = TransportError(
                        f"peer declared a frame of {length} bytes, over the cap of {self.max_frame} bytes; "
                        "refusing it (raise max_frame on both sides if frames this large are expected)"
                    )
                    raise self._error
                self._need = length
            take = min(self._need - len(self._buf), len(view))
            self._buf += view[:take]  # grows only with bytes that really arrived
            view = view[take:]
            if len(self._buf) == self._need:
                out.append(self._buf)
                self._buf = bytearray()
                self._need = None
        return out


__all__ = ["DEFAULT_MAX_FRAME", "HEARTBEAT", "PREFIX_SIZE", "Deframer", "prefix"]
