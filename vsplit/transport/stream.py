"""A channel over a connected socket: framing, reading in the caller's thread, heartbeats, byte accounting.

Theory of operation. :class:`StreamChannel` implements the :class:`~vsplit.transport.channel.Channel` interface
over one non-blocking TCP socket. What goes on the wire is decided by a *record layer*: TLS on the socket itself
for every real run (:mod:`vsplit.transport.tls`) or, in tests only, the identity (:mod:`vsplit.transport.plaintext`).
The layer reads plaintext from the socket and writes it, waiting for room itself (bounded by ``idle_timeout_s``);
this module does the framing, the waiting for data and the threads.

* ``send`` prefixes the frame with its length (:mod:`vsplit.transport.framing`) and writes it in pieces of at most
  :data:`CHUNK` bytes under a send lock, so frames never interleave (the heartbeat thread, a resumable channel's
  acks and the caller may all send). The length joins the first 16 KiB of the frame, one TLS record; the rest is
  written from the frame itself, never copied.
* **Reading: whoever needs a frame reads.** A training step sends one frame and waits for the answer, so the
  answer's latency is the cost. ``recv`` first takes a frame already queued; if none is, it takes the *read lock*
  and, in its own thread, waits for the socket, reads, and opens the TLS records straight into frames: the frame
  it waited for never crosses a thread (no wake-up, no hand-over of the GIL). Frames completed beyond the first
  wait in a bounded :class:`~vsplit.transport.inbox.Inbox` for the next ``recv``.
* **A background reader** covers the time nobody is in ``recv``: it waits on the socket and a wake-up pipe, and
  reads only while no caller is registered as reading (:meth:`StreamChannel.reading`; a caller entering ``recv``
  kicks it out of its wait through the pipe, and it steps back). So a peer's heartbeats, a drop, a silent peer or
  a TLS message are noticed even while the caller computes, and a resumable channel's delayed acks and clean
  closes are answered (:meth:`FrameSink.tick`). Both readers hold the read lock while they read, so the record
  layer and the deframer see one reader at a time, and :class:`~vsplit.transport.tls.TlsLayer` serializes its
  own reads and writes (an ``SSLSocket`` is never used from two threads at once). Plaintext the layer has taken off
  the socket but not handed over yet does not make the socket readable, so a reader asks the layer
  (:meth:`RecordLayer.buffered`) before it waits.
* **Where frames go.** Frames and the way the stream ended are handed to a :class:`FrameSink` in the thread that
  read them: by default the channel's own inbox (``recv`` takes from it); a
  :class:`~vsplit.transport.resume.ResumableChannel` attaches itself instead (:meth:`StreamChannel.attach`) and
  handles its numbered envelopes inline, so a resumable channel adds no thread hop either.
* **Backpressure.** A reader reads only while the sink has room (``max_buffered`` bytes queued): when the caller
  falls behind, nothing more is read and TCP flow control slows the peer down, so a flooding peer cannot make this
  side allocate without bound. ``recv(timeout=0)`` polls: it reads what is already waiting (if no other thread is
  reading) and never blocks.
* A heartbeat thread sends an empty frame whenever nothing was sent for ``heartbeat_s``; the reader (either one)
  declares the peer dead when nothing at all arrived for ``idle_timeout_s``.
* **Wire bytes** (:class:`WireStats`) are the kernel's counts of the connection's TCP payload, handshake included,
  where it tells (:func:`~vsplit.transport.tcpinfo.tcp_bytes`, Linux); elsewhere the layer's own estimate.
* ``close`` sends the layer's goodbye (TLS ``close_notify``), half-closes the socket, and lets the background reader
  drain what the peer still sends for up to ``linger_s`` before the socket is closed, so the last frames are not
  lost to a TCP reset.
* How a stream ends tells what happened to the peer, and ``recv`` raises it after the last frame: a clean close
  (``close_notify`` at a frame boundary) is :class:`~vsplit.transport.channel.PeerClosed` (the peer finished);
  a drop without one, a reset or silence is :class:`~vsplit.transport.channel.PeerLost` (the peer vanished).
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from vsplit.errors import ConfigError, TransportError
from vsplit.transport.channel import NothingYet, PeerClosed, PeerLost, RecvTimeout
from vsplit.transport.framing import DEFAULT_MAX_FRAME, HEARTBEAT, PREFIX_LIMIT, Deframer, prefix
from vsplit.transport.inbox import Inbox, Item, unwrap
from vsplit.transport.tcpinfo import tcp_bytes

log = logging.getLogger(__name__)

#: Plaintext bytes written per call when sending, and read at most per wake-up of a reader. Smaller pieces would let
#: the peer decrypt one while this side encrypts the next, but on two cores each piece's wake-up costs more than the
#: overlap gains (16 to 64 KiB pieces: round trip 0.55 to 0.64 ms against 0.50 ms, over memory buffers).
CHUNK = 256 * 1024
#: The most plaintext one TLS record carries: a frame's head goes out joined with this much of its body.
RECORD = 16 * 1024
#: How often a reader wakes up to check for an idle peer or a finished close.
_POLL_S = 0.25
#: While a caller reads, how often the background reader looks whether it still does. Waking it up instead each
#: time a caller leaves ``recv`` would cost a thread wake-up per frame, the very cost reading inline avoids.
_GLANCE_S = 0.02
#: While the consumer is behind, how often the background reader looks whether it may read again.
_TICK_FULL_S = 0.01


def check_frame(frame: bytes | bytearray | memoryview | int, *, peer: str, max_frame: int) -> None:
    """Refuse a frame a stream cannot carry (given whole or by its size): empty (that is a heartbeat) or over the
    ``max_frame`` cap."""
    size = frame if isinstance(frame, int) else len(frame)
    if not size:
        raise TransportError("cannot send an empty frame: on a stream an empty frame is a heartbeat")
    if size > max_frame:
        raise TransportError(
            f"frame of {size} bytes to {peer!r} is over the {max_frame}-byte cap; "
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
    included; segments the kernel sent again left out); ``payload_bytes_*`` count only the frames handed to ``send``
    or returned by ``recv``.
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
    """Reads and writes plaintext on the channel's non-blocking socket: TLS on the socket itself, or (tests only)
    the identity. Thread-safe: one thread may read while another writes."""

    #: Whether the layer has its own end-of-stream message (TLS ``close_notify``); without one, EOF is a close.
    closes_explicitly: bool

    #: True once the peer ended the stream with the layer's own end-of-stream message.
    ended: bool

    def write(self, data: bytes | memoryview, *, timeout: float) -> None:
        """Send all of ``data``; :class:`TimeoutError` if it could not all go out within ``timeout`` s (the peer
        stopped reading), ``OSError`` if the connection failed, :class:`TransportError` if the layer did."""

    def read_into(self, room: memoryview) -> int | None:
        """Write the next plaintext bytes into ``room`` and return how many; ``None`` when none are there until the
        socket is readable again; 0 at the end of the stream (:attr:`ended` tells whether it ended cleanly)."""

    def buffered(self) -> bool:
        """True if plaintext already taken off the socket waits to be read (the socket will not say so)."""

    def goodbye(self, *, timeout: float) -> None:
        """End the stream cleanly (waiting at most ``timeout`` s for room to say so) and half-close the socket;
        reads after this only drain the socket."""

    def counted(self) -> tuple[int, int]:
        """Wire bytes sent and received as far as this layer knows (exact, or an estimate where the layer cannot
        see them); a channel asks the kernel first (:func:`~vsplit.transport.tcpinfo.tcp_bytes`)."""


class FrameSink(Protocol):
    """Where a stream channel puts what it reads, called in the thread that read it (with the read lock held)."""

    def frames_arrived(self, link: StreamChannel, frames: list[bytearray]) -> None:
        """Frames opened from the wire, in order."""

    def link_ended(self, link: StreamChannel, exc: TransportError) -> None:
        """The stream ended (:class:`PeerClosed`, :class:`PeerLost`, or a :class:`TransportError`); after its frames."""

    def has_room(self) -> bool:
        """False while the reader should read no more (the consumer is behind)."""

    def tick(self, link: StreamChannel) -> float:
        """Nothing arrived while the background reader waited: do what is due; seconds until the next call at most."""


class Reader(Protocol):
    """What :func:`open_frames` reads from: a record layer's :meth:`RecordLayer.read_into` and
    :meth:`RecordLayer.buffered`."""

    def read_into(self, room: memoryview) -> int | None: ...

    def buffered(self) -> bool: ...


def open_frames(layer: Reader, deframer: Deframer, frames: list[bytearray], *,
                limit: int = CHUNK) -> tuple[int, bool]:
    """Read what ``layer`` has now into ``deframer`` and append the frames it completes to ``frames``; return the
    plaintext bytes read and whether the stream ended.

    The layer writes plaintext straight into the frame being assembled, so a frame's bytes are copied once, by the
    decryption itself. Reading stops when the layer has nothing more until the socket is readable, or after about
    ``limit`` bytes once nothing stays buffered inside the layer (a flooding peer cannot keep one reader in here).
    ``frames`` holds what was completed even when a later record fails to open.

    Example:
        >>> from vsplit.transport.framing import prefix
        >>> class Pieces:  # a reader over bytes, two at a time
        ...     def __init__(self, data): self.data = memoryview(data)
        ...     def buffered(self): return False
        ...     def read_into(self, room):
        ...         n = min(2, len(room), len(self.data))
        ...         room[:n], self.data = self.data[:n], self.data[n:]
        ...         return n or None
        >>> frames = []
        >>> open_frames(Pieces(prefix(b"hi") + b"hi" + prefix(b"there") + b"there"), Deframer(), frames)
        (15, False)
        >>> [bytes(f) for f in frames]
        [b'hi', b'there']
    """
    got = 0
    while got < limit or layer.buffered():
        n = layer.read_into(deframer.space())
        if n is None:
            return got, False
        if not n:
            return got, True
        got += n
        if (frame := deframer.commit(n)) is not None:
            frames.append(frame)
    return got, False


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
    ) -> None:
        self.peer = peer
        self.options = options if options is not None else ChannelOptions()
        self._sock = sock
        self._layer = layer
        self._deframer = deframer if deframer is not None else Deframer(max_frame=self.options.max_frame)
        self._inbox = Inbox(self.options.max_buffered)
        self._sink: FrameSink = _OwnInbox(self)
        self._reading = _Reading(self)
        self._send_lock = threading.Lock()
        self._read_lock = threading.Lock()  # held by whichever thread reads, opens and deframes the socket
        self._life_lock = threading.Lock()
        self._state = threading.Condition()  # guards the reader registrations below
        self._readers = 0  # callers in recv (or a resumable channel's recv) that read the socket themselves
        self._watching = False  # the background reader waits on the socket (a new reader must wake it)
        self._stop = threading.Event()
        self._closed = False
        self._ended = False  # the stream ended or failed: nothing more is read
        self._failure: BaseException | None = None
        self._reader_done = False
        self._socket_closed = False
        self._close_deadline = float("inf")
        self._last_sent = self._last_heard = time.monotonic()
        self._counts = dict.fromkeys(
            ("frames_sent", "frames_received", "payload_bytes_sent", "payload_bytes_received", "heartbeats_sent"), 0
        )
        self._scratch: memoryview | None = None  # where the peer's last bytes go after our close
        self._wire: tuple[int, int] | None = None  # the kernel's last counts, kept once the socket is closed
        sock.setblocking(False)  # the layer waits for room itself, bounded by idle_timeout_s, holding no lock
        self._selector = selectors.DefaultSelector()  # the socket alone: used under the read lock
        self._selector.register(sock, selectors.EVENT_READ)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._reader = threading.Thread(target=self._background_loop, name=f"vsplit-recv-{peer}", daemon=True)
        self._beater = threading.Thread(target=self._heartbeat_loop, name=f"vsplit-beat-{peer}", daemon=True)
        self._reader.start()
        self._beater.start()

    # -- Channel interface -----------------------------------------------------------------------------------------
    def send(self, frame: bytes | bytearray | memoryview) -> None:
        """Send one frame; a :class:`TransportError` if it is over ``max_frame`` or the connection failed."""
        self.send_parts(b"", frame)

    def send_parts(self, head: bytes, body: bytes | bytearray | memoryview) -> None:
        """Send one frame made of ``head`` then ``body``, without first joining them into a new buffer.

        A resumable channel sends its envelope header this way in front of a frame it keeps for resending: the
        frame goes on the wire without being copied into the envelope (a copy of a large frame costs about as much
        as sealing it).
        """
        if self._closed:
            raise TransportError(f"channel to {self.peer!r} is closed")
        size = len(head) + len(body)
        check_frame(size, peer=self.peer, max_frame=self.options.max_frame)
        with self._send_lock:
            self._write(prefix(size) + head, body)
            self._counts["frames_sent"] += 1
            self._counts["payload_bytes_sent"] += size

    def recv(self, timeout: float | None) -> bytearray:
        """Return the next frame; ``timeout=0`` polls and raises :class:`NothingYet` if none is waiting.

        The frame is read from the socket in this thread when none is queued (see the module docstring).
        """
        if self._failure is not None:
            raise type(self._failure)(str(self._failure))
        if self._closed:
            raise TransportError(f"channel to {self.peer!r} is closed")
        item = self._inbox.take()
        if item is None:
            item = self._read_for(self._inbox, timeout)
        if isinstance(item, BaseException):
            self._failure = item
        return unwrap(item)

    def close(self) -> None:
        """Say goodbye, stop the heartbeats and close the connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._send_lock.acquire(timeout=self.options.linger_s):
            try:
                self._layer.goodbye(timeout=self.options.linger_s)
            except (OSError, TransportError):
                pass
            finally:
                self._send_lock.release()
        self._close_deadline = time.monotonic() + self.options.linger_s
        self._wake()  # the background reader drains the peer's last bytes, then closes the socket
        self._close_socket_if_done()

    # -- reading, for this channel's recv and for a channel built on it (vsplit.transport.resume) --------------------
    def attach(self, sink: FrameSink) -> None:
        """From now on hand what is read to ``sink`` instead of this channel's inbox; what the inbox holds goes first.

        After this, :meth:`recv` is not used: the sink's owner reads with :meth:`reading` and :meth:`read_some`.
        """
        with self._read_lock:
            while (item := self._inbox.take()) is not None:
                if isinstance(item, TransportError):
                    sink.link_ended(self, item)
                else:
                    sink.frames_arrived(self, [item])  # type: ignore[list-item]
            self._sink = sink

    def reading(self) -> _Reading:
        """While inside (``with channel.reading():``), the caller reads the socket itself (:meth:`read_some`) and the
        background reader stays out."""
        return self._reading

    def _start_reading(self) -> None:
        with self._state:
            self._readers += 1
            watching = self._watching
        if watching:
            self._wake()

    def _stop_reading(self) -> None:
        with self._state:
            self._readers -= 1  # no wake-up: the background reader looks again within _GLANCE_S

    def read_some(self, wait: float, inbox: Inbox) -> None:
        """Wait up to ``wait`` seconds for the socket, read what came and hand it to the sink, in this thread.

        ``inbox`` is where the caller takes frames from: once it holds one (another thread read it while this one
        waited for the read lock), this returns at once. Returns at once too if the stream has ended, or
        (``wait == 0``) if another thread is reading. Call it inside :meth:`reading` when ``wait > 0``, or the
        background reader may take the bytes first.
        """
        if self._ended or self._closed:
            return
        if not self._read_lock.acquire(timeout=wait) if wait > 0 else not self._read_lock.acquire(blocking=False):
            return
        try:
            if not len(inbox):
                self._read_ready(wait)
        finally:
            self._read_lock.release()

    @property
    def ended(self) -> bool:
        """True once the stream ended or failed (the sink has been told)."""
        return self._ended

    @property
    def queued_bytes(self) -> int:
        """Bytes of received frames waiting for ``recv`` (at most ``options.max_buffered``, or one frame)."""
        return self._inbox.nbytes

    @property
    def wire_stats(self) -> WireStats:
        """A snapshot of the bytes and frames this channel sent and received (wire bytes as the kernel counts them
        where it tells, :func:`~vsplit.transport.tcpinfo.tcp_bytes`; else the layer's own count)."""
        sent, received = self._wire_bytes()
        return WireStats(heartbeats_received=self._deframer.heartbeats, wire_bytes_sent=sent,
                         wire_bytes_received=received, **self._counts)

    def _wire_bytes(self) -> tuple[int, int]:
        with self._life_lock:
            live = None if self._socket_closed else tcp_bytes(self._sock)
            if live is not None:
                self._wire = live
            return self._wire if self._wire is not None else self._layer.counted()

    def __enter__(self) -> StreamChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} to {self.peer!r} {state}>"

    # -- sending ---------------------------------------------------------------------------------------------------
    def _write(self, head: bytes, body: bytes | bytearray | memoryview) -> None:
        """Send ``head + body`` in pieces of at most :data:`CHUNK` bytes; the caller holds the send lock."""
        view = memoryview(body).cast("B") if len(body) else memoryview(b"")
        first = max(0, RECORD - len(head))
        pieces = [b"".join((head, view[:first]))]  # the head and the body's start fill one TLS record: a small copy
        pieces_rest = (view[i : i + CHUNK] for i in range(first, len(view), CHUNK))  # the rest is not copied
        try:
            for piece in (*pieces, *pieces_rest):
                self._layer.write(piece, timeout=self.options.idle_timeout_s)
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
    def _read_for(self, inbox: Inbox, timeout: float | None) -> Item:
        """Read in this thread until ``inbox`` has an item; :class:`NothingYet` or :class:`RecvTimeout` if none came."""
        if self._closed:
            raise TransportError(f"channel to {self.peer!r} is closed")
        if timeout == 0:
            self.read_some(0, inbox)
            item = inbox.take()
            if item is None:
                raise NothingYet
            return item
        end = float("inf") if timeout is None else time.monotonic() + timeout
        with self.reading():
            while (item := inbox.take()) is None:
                left = end - time.monotonic()
                if left <= 0:
                    raise RecvTimeout(f"no frame from {self.peer!r} within {timeout} s")
                if self._closed:
                    raise TransportError(f"channel to {self.peer!r} is closed")
                if self._ended:  # the failure is queued or about to be: wait for it
                    item = inbox.get(min(left, _POLL_S))
                    if item is not None:
                        return item
                    continue
                self.read_some(min(left, _POLL_S), inbox)
        return item

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # the pipe is full (a wake-up is pending anyway) or closed

    def _read_ready(self, wait: float) -> None:
        """With the read lock held: wait up to ``wait`` s for the socket, read once and hand on what came."""
        if self._ended:
            return
        if not self._layer.buffered() and not self._selector.select(wait):
            if time.monotonic() - self._last_heard > self.options.idle_timeout_s and not self._closed:
                self._end(PeerLost(
                    f"nothing from {self.peer!r} for {self.options.idle_timeout_s} s, not even a heartbeat: "
                    "the peer is down or the network is cut"
                ))
            return
        self._read_once()

    def _end(self, exc: TransportError, *, level: int = logging.WARNING) -> None:
        """The stream is over (the caller holds the read lock): tell the sink after the frames, read no more."""
        if self._ended:
            return
        self._ended = True
        self._stop.set()  # no heartbeats once nothing is read; send() still works, e.g. for an Abort
        if not self._closed:
            log.log(level, "channel to %s: %s", self.peer, exc)
        self._sink.link_ended(self, exc)
        self._wake()

    def _read_once(self) -> None:
        """Read what is waiting and hand on the frames; ends the stream on EOF or failure."""
        if self._closed:
            self._drain()
            return
        frames: list[bytearray] = []
        try:
            got, at_end = open_frames(self._layer, self._deframer, frames)  # frames are kept if a later record fails
        except TransportError as exc:
            self._hand_on(frames)
            self._end(TransportError(str(exc)))
            return
        except OSError as exc:
            self._hand_on(frames)
            self._end(PeerLost(f"connection to {self.peer!r} failed: {exc.strerror or exc}"))
            return
        if got:
            self._last_heard = time.monotonic()
        self._hand_on(frames)
        if at_end:
            self._end_of_stream(clean=self._layer.ended or not self._layer.closes_explicitly)

    def _drain(self) -> None:
        """After our own close: read and drop what the peer still sends, until its end."""
        if self._scratch is None:
            self._scratch = memoryview(bytearray(CHUNK))
        try:
            n = self._layer.read_into(self._scratch)
        except (OSError, TransportError) as exc:
            self._end(TransportError(f"connection to {self.peer!r} failed: {exc}"))
            return
        if n == 0:
            self._end_of_stream(clean=True)

    def _hand_on(self, frames: list[bytearray]) -> None:
        if frames:
            self._counts["frames_received"] += len(frames)
            self._counts["payload_bytes_received"] += sum(map(len, frames))
            self._sink.frames_arrived(self, frames)

    def _end_of_stream(self, *, clean: bool) -> None:
        if not self._deframer.at_boundary:
            self._end(TransportError(
                f"{self.peer!r} closed the connection in the middle of a frame "
                f"({self._deframer.buffered} bytes of it arrived): truncated"
            ))
        elif not clean:
            self._end(PeerLost(
                f"connection to {self.peer!r} dropped without a TLS close: the peer crashed or the network failed"
            ))
        else:
            self._end(PeerClosed(f"{self.peer!r} closed the channel"), level=logging.INFO)

    def _background_loop(self) -> None:
        """Read while nobody is in ``recv`` (see the module docstring); after ``close``, drain until ``linger_s``."""
        watch = selectors.DefaultSelector()
        watch.register(self._sock, selectors.EVENT_READ)
        watch.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._ended:
                if self._closed and time.monotonic() > self._close_deadline:
                    return
                with self._state:
                    while self._readers and not self._ended and not self._closed:
                        self._state.wait(_GLANCE_S)  # a caller reads, and checks idleness itself
                    self._watching = True
                try:
                    if not self._closed and not self._sink.has_room():
                        self._last_heard = time.monotonic()  # not listening: silence proves nothing
                        self._stop.wait(_TICK_FULL_S)
                        continue
                    wait = _POLL_S if self._closed else min(_POLL_S, self._sink.tick(self))
                    events = watch.select(0 if self._layer.buffered() else wait)
                finally:
                    with self._state:
                        self._watching = False
                if any(key.fileobj is self._wake_r for key, _ in events):
                    self._drain_wake()
                    continue  # a caller came to read, or the channel closed: look again
                with self._state:
                    if self._readers and not self._closed:
                        continue  # it reads what came
                if not self._read_lock.acquire(timeout=_POLL_S):
                    continue
                try:
                    if not self._readers or self._closed:
                        self._read_ready(0)
                finally:
                    self._read_lock.release()
        except Exception:  # the reader must never die silently: the caller is told
            log.exception("reader of the channel to %s failed", self.peer)
            with self._read_lock:
                self._end(TransportError(f"the reader of the channel to {self.peer!r} failed; see the log"))
        finally:
            watch.close()
            self._stop.set()
            self._reader_done = True
            self._close_socket_if_done()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(64):
                pass
        except OSError:
            pass

    def _close_socket_if_done(self) -> None:
        with self._life_lock:
            if self._closed and self._reader_done and not self._socket_closed:
                self._socket_closed = True
                try:
                    self._wire = tcp_bytes(self._sock) or self._wire
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._sock.close()  # a caller still in select sees nothing more, then EBADF: the end
                self._wake_r.close()
                self._wake_w.close()


class _Reading:
    """The context manager :meth:`StreamChannel.reading` returns (one per channel, no state of its own)."""

    __slots__ = ("_channel",)

    def __init__(self, channel: StreamChannel) -> None:
        self._channel = channel

    def __enter__(self) -> None:
        self._channel._start_reading()

    def __exit__(self, *exc: object) -> None:
        self._channel._stop_reading()


class _OwnInbox:
    """The default sink: a channel's own inbox, which its ``recv`` takes from."""

    def __init__(self, channel: StreamChannel) -> None:
        self._inbox = channel._inbox

    def frames_arrived(self, link: StreamChannel, frames: list[bytearray]) -> None:
        for frame in frames:
            self._inbox.put(frame)

    def link_ended(self, link: StreamChannel, exc: TransportError) -> None:
        self._inbox.put(exc)

    def has_room(self) -> bool:
        return not self._inbox.full

    def tick(self, link: StreamChannel) -> float:
        return _POLL_S


__all__ = [
    "CHUNK", "RECORD", "ChannelOptions", "FrameSink", "Inbox", "RecordLayer", "StreamChannel", "WireStats",
    "open_frames",
]
