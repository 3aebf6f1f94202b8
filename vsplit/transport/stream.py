"""A channel over a connected socket: framing, a reader thread, heartbeats, byte accounting.

Theory of operation. :class:`StreamChannel` implements the :class:`~vsplit.transport.channel.Channel` interface
over one TCP socket. What goes on the wire is decided by a *record layer*: TLS for every real run
(:mod:`vsplit.transport.tls`) or, in tests only, the identity (:mod:`vsplit.transport.plaintext`). The layer is
sans-IO: it turns plaintext into wire bytes and back, and this module does all the socket work.

* ``send`` prefixes the frame with its length (:mod:`vsplit.transport.framing`), seals it in pieces of
  :data:`CHUNK` bytes and writes them under a send lock, so frames never interleave.
* One reader thread waits until the socket is readable, opens what arrived, cuts it into frames and queues them;
  ``recv`` takes from the queue, so ``recv(timeout=0)`` can poll. A failure (oversize frame, TLS error, closed
  connection) is queued after the frames that preceded it and raised by ``recv``. The queue holds at most
  ``max_buffered`` bytes: when the caller falls behind, the reader stops reading and TCP flow control slows
  the peer down, so a flooding peer cannot make this side allocate without bound.
* A heartbeat thread sends an empty frame whenever nothing was sent for ``heartbeat_s``; the reader declares
  the peer dead when nothing at all arrived for ``idle_timeout_s``.
* ``close`` sends the layer's goodbye (TLS ``close_notify``), half-closes the socket, and lets the reader drain
  what the peer still sends for up to ``linger_s`` before the socket is closed, so the last frames are not lost
  to a TCP reset.
* How a stream ends tells what happened to the peer, and ``recv`` raises it after the last frame: a clean close
  (``close_notify`` at a frame boundary) is :class:`~vsplit.transport.channel.PeerClosed` (the peer finished);
  a drop without one, a reset or silence is :class:`~vsplit.transport.channel.PeerLost` (the peer vanished).
"""

from __future__ import annotations

import logging
import queue
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from vsplit.errors import ConfigError, TransportError
from vsplit.transport.channel import PeerClosed, PeerLost, take
from vsplit.transport.framing import DEFAULT_MAX_FRAME, HEARTBEAT, PREFIX_LIMIT, Deframer, prefix

log = logging.getLogger(__name__)

#: Plaintext bytes sealed per piece when sending, and raw bytes read per ``recv`` call.
CHUNK = 256 * 1024
#: How often the reader thread wakes up to check for an idle peer or a finished close.
_POLL_S = 0.25


def check_frame(frame: bytes | bytearray | memoryview, *, peer: str, max_frame: int) -> None:
    """Refuse a frame a stream cannot carry: empty (that is a heartbeat) or over the ``max_frame`` cap."""
    if not len(frame):
        raise TransportError("cannot send an empty frame: on a stream an empty frame is a heartbeat")
    if len(frame) > max_frame:
        raise TransportError(
            f"frame of {len(frame)} bytes to {peer!r} is over the {max_frame}-byte cap; "
            "send smaller batches or raise max_frame on both sides"
        )


@dataclass(frozen=True)
class ChannelOptions:
    """Settings of a stream channel; the defaults suit a WAN between two organizations.

    Example:
        >>> ChannelOptions(heartbeat_s=2.0, idle_timeout_s=10.0).max_frame
        67108864
        >>> ChannelOptions(heartbeat_s=5.0, idle_timeout_s=6.0)
        Traceback (most recent call last):
        ...
        vsplit.errors.ConfigError: idle_timeout_s (6.0) must be at least twice heartbeat_s (5.0), or one lost \
heartbeat kills the channel
    """

    #: Largest frame accepted or sent, in bytes (checked before any buffer is allocated).
    max_frame: int = DEFAULT_MAX_FRAME
    #: Send a heartbeat when nothing was sent for this long.
    heartbeat_s: float = 5.0
    #: Declare the peer dead when nothing (not even a heartbeat) arrived for this long.
    idle_timeout_s: float = 30.0
    #: Time allowed for the TLS handshake and the hello exchange of one connection.
    handshake_timeout_s: float = 10.0
    #: After ``close``, how long to drain the peer's last bytes before closing the socket.
    linger_s: float = 2.0
    #: Received frames waiting for ``recv`` may hold at most this many bytes (one frame always fits).
    max_buffered: int = 128 * 1024 * 1024

    def __post_init__(self) -> None:
        if not 0 < self.max_frame <= PREFIX_LIMIT:
            raise ConfigError(f"max_frame must be between 1 and {PREFIX_LIMIT} bytes, got {self.max_frame}")
        for name in ("heartbeat_s", "idle_timeout_s", "handshake_timeout_s", "linger_s", "max_buffered"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.idle_timeout_s < 2 * self.heartbeat_s:
            raise ConfigError(
                f"idle_timeout_s ({self.idle_timeout_s}) must be at least twice heartbeat_s ({self.heartbeat_s}), "
                "or one lost heartbeat kills the channel"
            )


@dataclass(frozen=True)
class WireStats:
    """What one channel put on and took off the wire.

    ``wire_bytes_*`` count raw TCP payload bytes (handshake, TLS records, length prefixes and heartbeats
    included); ``payload_bytes_*`` count only the frames handed to ``send`` or returned by ``recv``.
    """

    frames_sent: int
    frames_received: int
    payload_bytes_sent: int
    payload_bytes_received: int
    wire_bytes_sent: int
    wire_bytes_received: int
    heartbeats_sent: int
    heartbeats_received: int


class RecordLayer(Protocol):
    """Turns plaintext into wire bytes and back; no IO. Callers serialize ``seal`` and ``goodbye``."""

    #: Whether the layer has its own end-of-stream message (TLS ``close_notify``); without one, EOF is a close.
    closes_explicitly: bool

    def seal(self, data: bytes | memoryview) -> bytes:
        """Return the wire bytes for ``data``, after any wire bytes the layer still had to send."""

    def open(self, data: bytes) -> tuple[list[bytes], bool]:
        """Take raw bytes from the wire; return the plaintext pieces and whether the peer ended the stream."""

    def pending(self) -> bool:
        """True if ``open`` produced wire bytes that must be sent (fetch them with ``seal(b"")``)."""

    def goodbye(self) -> bytes:
        """Wire bytes that end the stream cleanly (may be empty)."""


class Inbox:
    """A FIFO of received frames and failures, bounded by the bytes it holds (one frame always fits)."""

    def __init__(self, limit: int) -> None:
        self._items: deque[bytearray | TransportError] = deque()
        self._limit = limit
        self.nbytes = 0
        self._cond = threading.Condition()

    def put(self, item: bytearray | TransportError, *, stop: threading.Event | None = None) -> bool:
        """Append ``item``, waiting while the inbox is full; False if ``stop`` was set while waiting.

        Without ``stop`` the item is appended at once (the few frames that arrived with the handshake).
        """
        size = len(item) if isinstance(item, bytearray) else 0
        with self._cond:
            while stop is not None and size and self.nbytes and self.nbytes + size > self._limit:
                if stop.is_set():
                    return False
                self._cond.wait(_POLL_S)
            self._items.append(item)
            self.nbytes += size
            self._cond.notify_all()
        return True

    def get(self, timeout: float | None) -> bytearray | TransportError:
        """Take the oldest item; :class:`queue.Empty` if none arrives within ``timeout`` (None: wait forever)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout=timeout):
                raise queue.Empty
            item = self._items.popleft()
            self.nbytes -= len(item) if isinstance(item, bytearray) else 0
            self._cond.notify_all()
            return item


class StreamChannel:
    """A :class:`~vsplit.transport.channel.Channel` over a connected socket and a record layer.

    Built by :func:`vsplit.transport.connect.open_channels` (TLS); tests may build a plaintext one with
    :func:`vsplit.transport.plaintext.insecure_plaintext_channel_for_tests`.
    """

    def __init__(
        self,
        sock: socket.socket,
        layer: RecordLayer,
        *,
        peer: str,
        options: ChannelOptions | None = None,
        deframer: Deframer | None = None,
        early_frames: Iterable[bytearray] = (),
        wire_bytes: tuple[int, int] = (0, 0),
    ) -> None:
        self.peer = peer
        self.options = options if options is not None else ChannelOptions()
        self._sock = sock
        self._layer = layer
        self._deframer = deframer if deframer is not None else Deframer(max_frame=self.options.max_frame)
        self._inbox = Inbox(self.options.max_buffered)
        self._send_lock = threading.Lock()
        self._life_lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False
        self._failure: TransportError | None = None
        self._reader_done = False
        self._socket_closed = False
        self._close_deadline = float("inf")
        self._last_sent = time.monotonic()
        self._counts = dict.fromkeys(
            ("frames_sent", "frames_received", "payload_bytes_sent", "payload_bytes_received", "heartbeats_sent"), 0
        )
        self._counts["wire_bytes_sent"], self._counts["wire_bytes_received"] = wire_bytes
        for frame in early_frames:
            self._counts["frames_received"] += 1
            self._counts["payload_bytes_received"] += len(frame)
            self._inbox.put(frame)
        sock.settimeout(self.options.idle_timeout_s)  # bounds sendall when the peer stops reading
        self._reader = threading.Thread(target=self._read_loop, name=f"vsplit-recv-{peer}", daemon=True)
        self._beater = threading.Thread(target=self._heartbeat_loop, name=f"vsplit-beat-{peer}", daemon=True)
        self._reader.start()
        self._beater.start()

    # -- Channel interface -----------------------------------------------------------------------------------------
    def send(self, frame: bytes | bytearray | memoryview) -> None:
        """Send one frame; a :class:`TransportError` if it is over ``max_frame`` or the connection failed."""
        if self._closed:
            raise TransportError(f"channel to {self.peer!r} is closed")
        check_frame(frame, peer=self.peer, max_frame=self.options.max_frame)
        with self._send_lock:
            self._write(prefix(frame), frame)
            self._counts["frames_sent"] += 1
            self._counts["payload_bytes_sent"] += len(frame)

    def recv(self, timeout: float | None) -> bytearray:
        """Return the next frame; ``timeout=0`` polls and raises :class:`NothingYet` if none is waiting."""
        if self._failure is not None:
            raise type(self._failure)(str(self._failure))
        if self._closed:
            raise TransportError(f"channel to {self.peer!r} is closed")
        item = take(self._inbox.get, timeout, peer=repr(self.peer))
        if isinstance(item, TransportError):
            self._failure = item
            raise type(item)(str(item))
        return item

    def close(self) -> None:
        """Say goodbye, stop the heartbeats and close the connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._send_lock.acquire(timeout=self.options.linger_s):
            try:
                bye = self._layer.goodbye()
                if bye:
                    self._sock.sendall(bye)
                self._sock.shutdown(socket.SHUT_WR)
            except (OSError, TransportError):
                pass
            finally:
                self._send_lock.release()
        self._close_deadline = time.monotonic() + self.options.linger_s
        self._close_socket_if_done()

    @property
    def queued_bytes(self) -> int:
        """Bytes of received frames waiting for ``recv`` (at most ``options.max_buffered`` plus one frame)."""
        return self._inbox.nbytes

    @property
    def wire_stats(self) -> WireStats:
        """A snapshot of the bytes and frames this channel sent and received."""
        return WireStats(heartbeats_received=self._deframer.heartbeats, **self._counts)

    def __enter__(self) -> StreamChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} to {self.peer!r} {state}>"

    # -- sending ---------------------------------------------------------------------------------------------------
    def _write(self, head: bytes, body: bytes | bytearray | memoryview) -> None:
        """Seal and send ``head + body`` in pieces; the caller holds the send lock."""
        view = memoryview(body).cast("B") if len(body) else memoryview(b"")
        first = CHUNK - len(head)
        pieces = [head + bytes(view[:first])]
        pieces_rest = (view[i : i + CHUNK] for i in range(first, len(view), CHUNK))
        try:
            for piece in (*pieces, *pieces_rest):
                wire = self._layer.seal(piece)
                self._sock.sendall(wire)
                self._counts["wire_bytes_sent"] += len(wire)
        except TimeoutError:
            raise PeerLost(
                f"{self.peer!r} stopped reading for {self.options.idle_timeout_s} s; the peer is stuck or gone"
            ) from None
        except OSError as exc:
            raise PeerLost(f"sending to {self.peer!r} failed: {exc.strerror or exc}") from None
        self._last_sent = time.monotonic()

    def _heartbeat_loop(self) -> None:
        interval = self.options.heartbeat_s
        while not self._stop.wait(max(0.0, self._last_sent + interval - time.monotonic())):
            if time.monotonic() - self._last_sent < interval:
                continue
            with self._send_lock:
                if self._closed:
                    return
                try:
                    self._write(HEARTBEAT, b"")
                except TransportError:
                    return  # the reader reports the broken connection
                self._counts["heartbeats_sent"] += 1

    # -- receiving -------------------------------------------------------------------------------------------------
    def _queue_frame(self, frame: bytearray) -> bool:
        self._counts["frames_received"] += 1
        self._counts["payload_bytes_received"] += len(frame)
        return self._inbox.put(frame, stop=self._stop)

    def _fail(self, text: str, *, level: int = logging.WARNING, kind: type[TransportError] = TransportError) -> None:
        if not self._closed:
            log.log(level, "channel to %s: %s", self.peer, text)
        self._inbox.put(kind(text), stop=self._stop)

    def _read_loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._sock, selectors.EVENT_READ)
        last_heard = time.monotonic()
        try:
            while True:
                ready = selector.select(_POLL_S)
                now = time.monotonic()
                if self._closed and now > self._close_deadline:
                    return
                if not ready:
                    if now - last_heard > self.options.idle_timeout_s and not self._closed:
                        self._fail(
                            f"nothing from {self.peer!r} for {self.options.idle_timeout_s} s, not even a heartbeat: "
                            "the peer is down or the network is cut", kind=PeerLost,
                        )
                        return
                    continue
                if not self._read_once():
                    return
                last_heard = time.monotonic()
        finally:
            selector.close()
            self._stop.set()  # no heartbeats once nothing is read; send() still works, e.g. for an Abort
            self._reader_done = True
            self._close_socket_if_done()

    def _read_once(self) -> bool:
        """Read what is waiting and queue the frames; False once the stream has ended or failed."""
        try:
            data = self._sock.recv(CHUNK)
        except (TimeoutError, BlockingIOError, InterruptedError):
            return True
        except OSError as exc:
            self._fail(f"connection to {self.peer!r} failed: {exc.strerror or exc}", kind=PeerLost)
            return False
        if not data:
            self._end_of_stream(clean=not self._layer.closes_explicitly)
            return False
        self._counts["wire_bytes_received"] += len(data)
        if self._closed:
            return True  # draining after our own close: the caller no longer reads
        try:
            pieces, ended = self._layer.open(data)
            if self._layer.pending():
                with self._send_lock:
                    wire = self._layer.seal(b"")
                    self._sock.sendall(wire)
                    self._counts["wire_bytes_sent"] += len(wire)
            for piece in pieces:
                for frame in self._deframer.feed(piece):
                    if not self._queue_frame(frame):
                        return False  # closed while waiting for room
        except TransportError as exc:
            self._fail(str(exc))
            return False
        except OSError as exc:
            self._fail(f"connection to {self.peer!r} failed: {exc.strerror or exc}")
            return False
        if ended:
            self._end_of_stream(clean=True)
            return False
        return True

    def _end_of_stream(self, *, clean: bool) -> None:
        if not self._deframer.at_boundary:
            self._fail(
                f"{self.peer!r} closed the connection in the middle of a frame "
                f"({self._deframer.buffered} bytes of it arrived): truncated"
            )
        elif not clean:
            self._fail(
                f"connection to {self.peer!r} dropped without a TLS close: the peer crashed or the network failed",
                kind=PeerLost,
            )
        else:
            self._fail(f"{self.peer!r} closed the channel", level=logging.INFO, kind=PeerClosed)

    def _close_socket_if_done(self) -> None:
        with self._life_lock:
            if self._closed and self._reader_done and not self._socket_closed:
                self._socket_closed = True
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._sock.close()


__all__ = ["CHUNK", "ChannelOptions", "Inbox", "RecordLayer", "StreamChannel", "WireStats"]
