"""A channel over a connected socket: framing, a reader thread, heartbeats, byte accounting.

Theory of operation. :class:`StreamChannel` implements the :class:`~vsplit.transport.channel.Channel` interface
over one TCP socket. What goes on the wire is decided by a *record layer*: TLS for every real run
(:mod:`vsplit.transport.tls`) or, in tests only, the identity (:mod:`vsplit.transport.plaintext`). The layer is
sans-IO: it turns plaintext into wire bytes and back, and this module does all the socket work.

* ``send`` prefixes the frame with its length (:mod:`vsplit.transport.framing`), seals it in pieces of
  :data:`CHUNK` bytes and writes them under a send lock, so frames never interleave.
* Reading has no thread hop on the hot path: ``recv`` reads the socket itself, on the caller's thread (waiting at
  most its timeout), opens what arrived, cuts it into frames and returns the first; ``recv(timeout=0)`` polls. While
  no caller is in ``recv``, a background reader thread does the same reading into a queue, which ``recv`` empties
  first, so the peer is heard (acknowledgements, a goodbye, a failure) while the owner computes. One lock makes sure
  only one of them reads at a time. A layer above may :meth:`StreamChannel.attach` a :class:`FrameSink`: frames and
  the failure then go to it on whichever thread read them, so a resumable channel (:mod:`vsplit.transport.resume`)
  numbers and acknowledges frames where they arrive and its ``recv`` drives the reading through :meth:`pump`.
  A failure (oversize frame, TLS error, closed connection) is queued after the frames that preceded it and raised
  by ``recv``. The queue holds at most ``max_buffered`` bytes (plus what one read of :data:`CHUNK` bytes completes
  when the caller reads: it only reads when the queue is empty): when the caller falls behind, the reader stops
  reading and TCP flow control slows the peer down, so a flooding peer cannot make this side allocate without
  bound.
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

import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from vsplit.errors import ConfigError, TransportError
from vsplit.transport.channel import NothingYet, PeerClosed, PeerLost, RecvTimeout
from vsplit.transport.framing import DEFAULT_MAX_FRAME, HEARTBEAT, PREFIX_LIMIT, Deframer, prefix

log = logging.getLogger(__name__)

#: Plaintext bytes sealed per piece when sending, and raw bytes read per ``recv`` call.
CHUNK = 256 * 1024
#: How often the reader thread wakes up to check for an idle peer or a finished close.
_POLL_S = 0.25
#: How often the background reader looks again whether a caller is still reading.
_IDLE_WAIT_S = 0.05
#: How long a caller waits for the background reader's frames before it tries to read itself again.
_HANDOVER_S = 0.005


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


class FrameSink(Protocol):
    """Takes a stream channel's frames on its reader thread, in place of its queue (:meth:`StreamChannel.attach`)."""

    def frame(self, frame: bytearray, *, wait: bool) -> bool:
        """One received frame; False stops the reader (the sink is done with this stream). ``wait``: whether it may
        wait for room in a queue (False on the thread of a caller of ``recv`` or :meth:`StreamChannel.pump`)."""

    def failed(self, exc: TransportError) -> None:
        """The stream ended or failed (after its last frame); called at most once."""

    def quiet_s(self) -> float:
        """How long the reader may wait for bytes before it calls :meth:`quiet` (a delayed acknowledgement)."""

    def quiet(self) -> None:
        """Nothing arrived for :meth:`quiet_s` seconds."""


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

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the inbox holds an item; whether it does."""
        with self._cond:
            return self._cond.wait_for(lambda: self._items, timeout=timeout)

    def take_nowait(self) -> bytearray | TransportError | None:
        """The oldest item, or None if the inbox is empty (no waiting)."""
        if not self._items:
            return None
        try:
            return self.get(0)
        except queue.Empty:
            return None

    @property
    def waiting(self) -> int:
        """Items (frames and failures) in the queue."""
        return len(self._items)

    def get(self, timeout: float | None) -> bytearray | TransportError:
        """Take the oldest item; :class:`queue.Empty` if none arrives within ``timeout`` (None: wait forever)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout=timeout):
                raise queue.Empty
            item = self._items.popleft()
            self.nbytes -= len(item) if isinstance(item, bytearray) else 0
            self._cond.notify_all()
            return item


def read_until(inbox: Inbox, step: Callable[[float | None], None], timeout: float | None, *,
               peer: str) -> bytearray | TransportError:
    """Call ``step(seconds_left)`` (one wait and read on the caller's thread) until ``inbox`` holds an item; the item.

    Past ``timeout`` raises :class:`~vsplit.transport.channel.NothingYet` (``timeout=0``: a poll) or
    :class:`~vsplit.transport.channel.RecvTimeout`; ``None`` waits forever."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        step(None if end is None else max(0.0, end - time.monotonic()))
        item = inbox.take_nowait()
        if item is not None:
            return item
        if end is not None and time.monotonic() >= end:
            if timeout == 0:
                raise NothingYet
            raise RecvTimeout(f"no frame from {peer!r} within {timeout} s")


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
        self._sink: FrameSink | None = None
        self._sink_lock = threading.Lock()
        self._read_lock = threading.Lock()  # whoever holds it reads the socket: a caller of recv/pump, or the reader
        self._callers = 0  # threads in recv or pump; the background reader leaves the socket to them
        self._callers_cond = threading.Condition()
        self._ended = False  # the stream ended or failed (the failure is queued or given to the sink)
        self._last_heard = time.monotonic()
        self._caller_selector: selectors.BaseSelector | None = None
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
        item = self._inbox.take_nowait()
        if item is None:
            item = self._read_for_caller(timeout)
        if isinstance(item, TransportError):
            self._failure = item
            raise type(item)(str(item))
        return item

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """While the block runs, this thread reads (through :meth:`pump`) and the background reader stays off the
        socket: a caller that pumps in a loop keeps it for the whole wait, so no frame takes the thread hop."""
        with self._callers_cond:
            self._callers += 1
        try:
            yield
        finally:
            with self._callers_cond:
                self._callers -= 1

    def pump(self, timeout: float | None) -> bool:
        """Read, on this thread, what arrives within ``timeout`` seconds (at most one read) and hand the frames to
        the queue or the attached sink; returns at once if the queue holds something or the stream has ended.
        False if the background reader was reading (the caller then waits for what it hands over)."""
        with self._callers_cond:
            self._callers += 1
        try:
            return self._read_here(timeout)
        finally:
            with self._callers_cond:
                self._callers -= 1

    def _read_for_caller(self, timeout: float | None) -> bytearray | TransportError:
        """``recv`` with an empty queue: read on the caller's thread until a frame or failure arrives."""
        def step(left: float | None) -> None:
            if not self._read_here(left):  # the background reader is reading: it queues the frames
                self._inbox.wait(_HANDOVER_S if left is None else min(left, _HANDOVER_S))

        with self._callers_cond:
            self._callers += 1
        try:
            return read_until(self._inbox, step, timeout, peer=self.peer)
        finally:
            with self._callers_cond:
                self._callers -= 1

    def _read_here(self, timeout: float | None) -> bool:
        """One wait (up to ``timeout``, in slices that check for silence) and read, on the calling thread; False
        if the background reader holds the socket (it is handing frames over)."""
        if self._ended or self._inbox.waiting:
            if timeout and self._ended and not self._inbox.waiting:
                time.sleep(min(timeout, _POLL_S))  # a sink has the failure; its owner sees it
            return True
        if not self._read_lock.acquire(blocking=False):
            return False
        try:
            if self._ended or self._inbox.waiting:  # the background reader read just before
                return True
            if self._caller_selector is None:
                self._caller_selector = selectors.DefaultSelector()
                self._caller_selector.register(self._sock, selectors.EVENT_READ)
            sink = self._sink
            wait = _POLL_S if timeout is None else min(timeout, _POLL_S)
            if sink is not None:
                wait = min(wait, sink.quiet_s())
            if self._caller_selector.select(wait):
                if not self._read_once(caller=True):
                    self._ended = True
                return True
            if sink is not None and not self._closed:
                sink.quiet()
            self._check_silence()
            return True
        finally:
            self._read_lock.release()

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

    def attach(self, sink: FrameSink) -> None:
        """From now on hand every frame and the failure to ``sink`` on the reader thread (see :class:`FrameSink`);
        what already waits in the queue goes to it first, in order. ``recv`` is not used any more."""
        with self._sink_lock:
            self._sink = sink
            self._drain_to_sink()

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
    def _queue_frame(self, frame: bytearray, *, caller: bool) -> bool:
        self._counts["frames_received"] += 1
        self._counts["payload_bytes_received"] += len(frame)
        return self._hand_over(frame, caller=caller)

    def _fail(self, text: str, *, level: int = logging.WARNING, kind: type[TransportError] = TransportError,
              caller: bool = False) -> None:
        if not self._closed:
            log.log(level, "channel to %s: %s", self.peer, text)
        self._ended = True
        self._hand_over(kind(text), caller=caller)

    def _hand_over(self, item: bytearray | TransportError, *, caller: bool) -> bool:
        """Queue ``item`` for ``recv``, or give it to the attached sink (after what still waits in the queue).

        On the caller's thread the queue never waits for room (the caller, who would make room, is right here)."""
        if self._sink is None:
            if not self._inbox.put(item, stop=None if caller else self._stop):
                return False
            if self._sink is None:
                return True
            item = None  # type: ignore[assignment]  # attached meanwhile: hand over what waits, this item with it
        with self._sink_lock:
            going = self._drain_to_sink(wait=not caller)
            if item is None or not going:
                return going
            return self._give(item, wait=not caller)

    def _drain_to_sink(self, *, wait: bool = True) -> bool:
        """Give the attached sink what waits in the queue (the caller holds the sink lock); False once it is done."""
        while self._inbox.waiting:
            if not self._give(self._inbox.get(0), wait=wait):
                return False
        return True

    def _give(self, item: bytearray | TransportError, *, wait: bool) -> bool:
        assert self._sink is not None
        if isinstance(item, TransportError):
            self._sink.failed(item)
            return False
        return self._sink.frame(item, wait=wait)

    def _read_loop(self) -> None:
        """The background reader: reads while no caller is in ``recv`` or :meth:`pump`, and drains after a close."""
        selector = selectors.DefaultSelector()
        selector.register(self._sock, selectors.EVENT_READ)
        try:
            while not self._ended:
                with self._callers_cond:
                    while self._callers and not self._closed and not self._ended:
                        self._callers_cond.wait(_IDLE_WAIT_S)
                sink = self._sink
                wait = _POLL_S if sink is None else min(_POLL_S, sink.quiet_s())
                ready = selector.select(wait)
                if self._closed and time.monotonic() > self._close_deadline:
                    return
                if self._callers or not self._read_lock.acquire(blocking=False):
                    continue  # a caller reads
                try:
                    if self._ended:
                        return
                    if not ready:
                        if sink is not None and not self._closed:
                            sink.quiet()
                        if self._check_silence():
                            return
                        continue
                    if not self._read_once(caller=False):
                        self._ended = True
                        return
                finally:
                    self._read_lock.release()
        finally:
            selector.close()
            self._stop.set()  # no heartbeats once nothing is read; send() still works, e.g. for an Abort
            self._reader_done = True
            self._close_socket_if_done()

    def _check_silence(self) -> bool:
        """Fail the stream if nothing at all arrived for ``idle_timeout_s`` (the caller holds the read lock)."""
        if self._closed or self._ended or time.monotonic() - self._last_heard <= self.options.idle_timeout_s:
            return False
        self._fail(
            f"nothing from {self.peer!r} for {self.options.idle_timeout_s} s, not even a heartbeat: "
            "the peer is down or the network is cut", kind=PeerLost,
        )
        return True

    def _read_once(self, *, caller: bool) -> bool:
        """Read what is waiting and queue the frames (the caller holds the read lock); False once the stream has
        ended or failed. ``caller``: on the thread of a ``recv`` or :meth:`pump` (never waits for room)."""
        try:
            data = self._sock.recv(CHUNK, socket.MSG_DONTWAIT)
        except (TimeoutError, BlockingIOError, InterruptedError):
            return True
        except OSError as exc:
            self._fail(f"connection to {self.peer!r} failed: {exc.strerror or exc}", kind=PeerLost, caller=caller)
            return False
        if not data:
            self._end_of_stream(clean=not self._layer.closes_explicitly, caller=caller)
            return False
        self._last_heard = time.monotonic()
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
                    if not self._queue_frame(frame, caller=caller):
                        return False  # closed while waiting for room, or the sink is done with this stream
        except TransportError as exc:
            self._fail(str(exc), caller=caller)
            return False
        except OSError as exc:
            self._fail(f"connection to {self.peer!r} failed: {exc.strerror or exc}", caller=caller)
            return False
        if ended:
            self._end_of_stream(clean=True, caller=caller)
            return False
        return True

    def _end_of_stream(self, *, clean: bool, caller: bool) -> None:
        if not self._deframer.at_boundary:
            self._fail(
                f"{self.peer!r} closed the connection in the middle of a frame "
                f"({self._deframer.buffered} bytes of it arrived): truncated", caller=caller,
            )
        elif not clean:
            self._fail(
                f"connection to {self.peer!r} dropped without a TLS close: the peer crashed or the network failed",
                kind=PeerLost, caller=caller,
            )
        else:
            self._fail(f"{self.peer!r} closed the channel", level=logging.INFO, kind=PeerClosed, caller=caller)

    def _close_socket_if_done(self) -> None:
        with self._life_lock:
            if self._closed and self._reader_done and not self._socket_closed:
                self._socket_closed = True
                if self._caller_selector is not None and self._read_lock.acquire(blocking=False):
                    self._caller_selector.close()  # not while a caller still waits on it
                    self._read_lock.release()
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._sock.close()


__all__ = ["CHUNK", "ChannelOptions", "FrameSink", "Inbox", "RecordLayer", "StreamChannel", "WireStats", "read_until"]
