"""A channel that survives a dropped connection: numbered frames over successive mutual-TLS links.

Theory of operation. A :class:`ResumableChannel` is a :class:`~vsplit.transport.channel.Channel` to one peer made
of a series of *links*, each one :class:`~vsplit.transport.tls.TlsChannel` (a TCP connection with the full mutual
TLS 1.3 handshake, the hello and the pin checks of :mod:`vsplit.transport.tls`). The pump above sees one
uninterrupted stream; when a link drops, the channel gets a new one and carries on where the old one stopped.

* **Numbering.** Every frame handed to :meth:`~ResumableChannel.send` travels in a DATA envelope numbered 0, 1, 2,
  ... in its direction (:mod:`vsplit.transport.numbered`). The receiver delivers frame *n* only after *n - 1*: a
  number it has seen is a duplicate and is dropped; a number beyond the next is a gap, which an ordered stream
  cannot produce, so it is refused as a protocol violation.
* **No thread of its own.** The channel attaches itself to each link as the link's
  :class:`~vsplit.transport.stream.FrameSink`: whichever thread reads the link hands the envelopes here and they are
  handled on the spot (acks noted, numbered frames accepted or dropped as duplicates, the goodbye seen) before the
  payloads are queued. ``recv`` reads the current link in the caller's thread when nothing is queued, so a frame the
  caller waits for crosses no thread: one TLS read, one envelope check, returned. While nobody calls ``recv``, the
  link's background reader does the same (and sends the delayed acks), so a peer's goodbye or acks are answered
  while the owner computes. A full inbox stops the link's reading, as in a stream channel.
* **Acks.** Every DATA envelope carries the number of frames its sender has received (a piggybacked ack); when the
  traffic is one-way, the receiver also sends an ACK alone after 32 frames or 1 MiB, or once nothing arrived for
  20 ms. The sender keeps each frame until it is acknowledged, in a resend buffer bounded by
  ``ResumeOptions.max_unacked`` bytes (one frame always fits): ``send`` waits while it is full, and raises a
  :class:`~vsplit.errors.TransportError` saying so after ``idle_timeout_s`` (plus the reconnection deadline while
  the link is down).
* **A drop** is anything that ends a link without a goodbye: a reset, an EOF without ``close_notify`` or
  without a GOODBYE envelope, a TLS error, nothing heard for ``idle_timeout_s`` (the link's read timeout). The
  channel then starts a deadline of ``ResumeOptions.timeout_s`` (``network.reconnect_timeout_s``); frames sent
  meanwhile wait in the resend buffer and ``recv`` simply waits.
* **Who redials.** The dialing side (a partner) redials with jittered exponential backoff (50 ms doubling to 1 s,
  the first attempt at once) until the deadline. The listening side (the hub) keeps its listening socket open for
  the whole run (:class:`~vsplit.transport.reconnect.StandingListener`) and waits.
* **Resuming.** A new link opens with the usual TLS handshake, hello and pin checks, then a RESUME envelope each
  way: the channel's token (random, chosen by the dialer at the first connection) and how many frames that side
  has received. Each side drops what the other already has and resends the rest, in order, before any new frame;
  duplicates that were in flight when the old link died are dropped on arrival. A listener that gets a new link
  for a party whose old link still looks alive (a half-open connection) takes the new one: it passed the same pin
  check.
* **What a stranger gets.** The listener authenticates every new connection exactly as at the start: a
  certificate that is not pinned, or the certificate of another party, is refused during the handshake (the
  stranger learns only a TLS alert or ``ok: false``), logged with the reason, and never reaches the channel. A
  connection with the right certificate but another token (a restarted process of that party) is refused too:
  only the same process may resume.
* **Deadline.** Past the deadline ``recv`` raises :class:`~vsplit.transport.channel.PeerLost` naming the peer and
  the deadline after every frame that did arrive, and ``send`` raises it too; the run stops as after any drop, and
  ``--resume`` restarts it from the last checkpoint.
* **A clean close** is not a drop: :meth:`~ResumableChannel.close` sends a numbered GOODBYE and waits (up to
  ``linger_s``, or through a reconnection until its deadline) until the peer has acknowledged everything, then
  closes the link with ``close_notify``. The peer's ``recv`` raises :class:`~vsplit.transport.channel.PeerClosed`
  after the last frame, as over a plain TLS channel.

Security properties stay those of the links: frame caps are checked before allocation (the link's cap is the
channel's plus the 17-byte envelope), queues are bounded (the receive inbox, whose fullness stops the links' reading,
and the resend buffer), every wait has a timeout, and nothing ever crosses without mutual TLS.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from vsplit.errors import AuthenticationError, ConfigError, ProtocolError, TransportError
from vsplit.transport import numbered
from vsplit.transport.channel import NothingYet, PeerClosed, PeerLost, RecvTimeout
from vsplit.transport.framing import PREFIX_LIMIT
from vsplit.transport.inbox import Inbox, Item, unwrap
from vsplit.transport.stream import ChannelOptions, StreamChannel, check_frame
from vsplit.transport.tls import TlsChannel

log = logging.getLogger(__name__)

#: A standalone ACK goes out after this many frames or bytes received without one.
ACK_EVERY_FRAMES, ACK_EVERY_BYTES = 32, 1 << 20
#: With an ack owed, a reader waits this long for a frame to piggyback on before sending the ACK alone.
ACK_DELAY_S = 0.02
_TICK_S = 0.5
_LINK_BUFFER = 8 << 20
_BACKOFF_START_S, _BACKOFF_MAX_S = 0.05, 1.0

#: ``redial(seconds_left)``: one more connection to the peer (retrying refused connections), authenticated, and the
#: peer's RESUME envelope; raises :class:`TransportError` when this attempt failed.
Redial = Callable[[float], tuple[TlsChannel, numbered.Envelope]]


@dataclass(frozen=True)
class ResumeOptions:
    """How long a dropped link may take to come back, and how much unacknowledged data a side keeps.

    >>> ResumeOptions(timeout_s=0)
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: reconnect timeout must be positive, got 0 (use plain channels to switch reconnects off)
    """

    #: Seconds from a drop until the peer counts as lost (``network.reconnect_timeout_s``).
    timeout_s: float = 60.0
    #: Bytes of sent frames kept until the peer acknowledges them.
    max_unacked: int = 128 << 20

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ConfigError(f"reconnect timeout must be positive, got {self.timeout_s} "
                              "(use plain channels to switch reconnects off)")
        if self.max_unacked <= 0:
            raise ConfigError(f"max_unacked must be positive, got {self.max_unacked}")


@dataclass(frozen=True)
class Reconnect:
    """One drop of a link and how it ended (``time.monotonic()`` seconds)."""

    reason: str
    dropped_at: float
    restored_at: float | None = None
    #: frames sent again on the new link because the peer did not have them
    resent: int = 0


def link_options(options: ChannelOptions) -> ChannelOptions:
    """The options of each link under a channel with ``options``: room for the envelope, a small read buffer.

    >>> link_options(ChannelOptions(max_frame=1000)).max_frame
    1017
    """
    return replace(options, max_frame=min(PREFIX_LIMIT, options.max_frame + numbered.OVERHEAD),
                   max_buffered=min(options.max_buffered, _LINK_BUFFER))


def read_resume(link: TlsChannel, *, timeout: float, who: str) -> numbered.Envelope:
    """The peer's RESUME envelope, the first frame of every link; :class:`TransportError` if it sends another."""
    try:
        frame = link.recv(timeout=timeout)
    except RecvTimeout:
        raise TransportError(f"{who} did not start the resume handshake within {timeout} s") from None
    try:
        env = numbered.parse(frame)
    except ProtocolError:
        env = None
    if env is None or env.kind != numbered.RESUME:
        raise TransportError(
            f"{who} did not start the resume handshake: it runs with network.reconnect_timeout_s = 0 or another "
            "vsplit version; set the same network.reconnect_timeout_s (0 or not) on both sides"
        )
    return env


class ResumableChannel:
    """A :class:`~vsplit.transport.channel.Channel` to one peer over successive TLS links (see the module docstring).

    Built by :func:`vsplit.transport.reconnect.dial_resumable` (dialing side, with ``redial``) and
    :class:`vsplit.transport.reconnect.StandingListener` (listening side, which hands new links to :meth:`adopt`).
    ``link`` is the first link, whose RESUME handshake is done.
    """

    def __init__(
        self,
        link: TlsChannel,
        *,
        token: bytes,
        options: ChannelOptions | None = None,
        resume: ResumeOptions | None = None,
        redial: Redial | None = None,
        on_close: Callable[[ResumableChannel], None] | None = None,
    ) -> None:
        self.peer = link.peer
        self.peer_fingerprint = link.peer_fingerprint
        self.token = token
        self.options = options if options is not None else ChannelOptions()
        self.resume_options = resume if resume is not None else ResumeOptions()
        #: Every drop so far, in order.
        self.reconnects: list[Reconnect] = []
        self._redial = redial
        self._on_close = on_close
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()  # held while writing numbered frames, so the wire order is the numbering
        self._deliver_lock = threading.Lock()  # held from accepting a frame to queueing it: the queue order is too
        self._link: TlsChannel | None = link
        self._outbox = numbered.Outbox(limit=self.resume_options.max_unacked)
        self._inbound = numbered.Inbound()
        self._inbox = Inbox(self.options.max_buffered)
        self._told = 0  # the received count the peer last heard from us
        self._owed = (0, 0)  # frames and bytes received since then
        self._state = "up"  # up | down | lost | done
        self._deadline = 0.0
        self._up_since = time.monotonic()
        self._peer_done = False
        self._closing = False
        self._failure: BaseException | None = None
        self._raised: BaseException | None = None
        self._stop = threading.Event()
        self._last_arrival = time.monotonic()
        link.attach(self)

    # -- Channel interface -----------------------------------------------------------------------------------------
    def send(self, frame: bytes | bytearray | memoryview) -> None:
        """Number and send one frame; while the link is down it waits in the resend buffer.

        A ``bytes`` or ``bytearray`` frame is kept as it is until the peer acknowledges it (no copy): do not change
        it after sending (the pump never does: every frame is a new encoding).
        """
        if self._closing:
            raise TransportError(f"channel to {self.peer!r} is closed")
        check_frame(frame, peer=self.peer, max_frame=self.options.max_frame)
        # kept for resending as it is (bytes and bytearrays are not copied; see Outbox), a view as a copy
        body = frame if isinstance(frame, (bytes, bytearray)) else bytes(frame)
        self._wait_for_room(len(body) + numbered.OVERHEAD)
        with self._send_lock:
            with self._cond:
                self._raise_if_lost()
                if self._peer_done:
                    log.debug("%r said goodbye; a frame to it is dropped", self.peer)
                    return
                received = self._inbound.received
                envelope = self._outbox.add(lambda seq: numbered.data_head(seq, received), body)
                self._told, self._owed = received, (0, 0)
                link = self._link
            if link is not None:
                self._write(link, envelope)

    def recv(self, timeout: float | None) -> bytearray:
        """The next frame, in order and exactly once; ``timeout=0`` polls (:func:`~vsplit.transport.channel.take`)."""
        if self._raised is not None:
            raise _again(self._raised)
        if self._closing:
            raise TransportError(f"channel to {self.peer!r} is closed")
        item = self._inbox.take()
        if item is None:
            item = self._read_for(timeout)
        if isinstance(item, BaseException):
            self._raised = item
        return unwrap(item)

    def close(self) -> None:
        """Say goodbye, wait until the peer has everything (see the module docstring), close the link; idempotent."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            farewell = self._state in ("up", "down") and not self._peer_done
        if farewell:
            with self._send_lock:
                with self._cond:
                    received = self._inbound.received
                    envelope = self._outbox.add(lambda seq: numbered.goodbye(seq, received))
                    link = self._link
                if link is not None:
                    self._write(link, envelope)
            self._await_acknowledged()
        with self._cond:
            self._stop.set()
            if self._state in ("up", "down"):
                self._state = "done"
            link, self._link = self._link, None
            self._cond.notify_all()
        if link is not None:
            link.close()
        if self._on_close is not None:
            self._on_close(self)

    # -- state, for the listener and for tests ---------------------------------------------------------------------
    @property
    def received(self) -> int:
        """Frames received in order so far."""
        return self._inbound.received

    @property
    def state(self) -> str:
        """``up`` (a link carries frames), ``down`` (reconnecting), ``lost`` (past the deadline), ``done`` (closed)."""
        return self._state

    @property
    def closed(self) -> bool:
        return self._closing

    @property
    def duplicates(self) -> int:
        """Frames that arrived twice (resent after a reconnection) and were dropped."""
        return self._inbound.duplicates

    def adopt(self, link: TlsChannel, *, token: bytes, received: int) -> str | None:
        """Listening side: take ``link`` (authenticated, RESUMEs exchanged) as the new link; the refusal or None."""
        if token != self.token:
            return (f"{self.peer!r} connected with another session token: a new process of {self.peer!r} cannot "
                    "join a run its earlier process started; stop both and restart them with --resume")
        if link.peer_fingerprint != self.peer_fingerprint:  # the pins cannot change during a run: belt and braces
            return f"{self.peer!r} reconnected with another certificate than it started the run with"
        if not self._install(link, received, announce=False):
            return f"the channel to {self.peer!r} has ended ({self._state}); it takes no new connection"
        return None

    def __enter__(self) -> ResumableChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} to {self.peer!r} {self._state}>"

    # -- sending ---------------------------------------------------------------------------------------------------
    def _write(self, link: TlsChannel, envelope: numbered.Parts) -> None:
        try:
            link.send_parts(*envelope)
        except TransportError as exc:
            self._link_failed(link, exc)  # the frame stays in the resend buffer

    def _wait_for_room(self, size: int) -> None:
        with self._cond:
            end = time.monotonic() + self.options.idle_timeout_s
            while not self._outbox.room_for(size):
                self._raise_if_lost()
                if self._peer_done or self._closing:
                    return
                now = time.monotonic()
                if self._state == "down":
                    end = max(end, self._deadline + self.options.idle_timeout_s)
                if now >= end:
                    raise TransportError(
                        f"resend buffer to {self.peer!r} is full: {self._outbox.nbytes} bytes sent and not "
                        f"acknowledged (cap {self._outbox.limit} bytes) for {self.options.idle_timeout_s} s; the peer "
                        "stopped reading"
                    )
                self._cond.wait(min(_TICK_S, end - now))

    def _await_acknowledged(self) -> None:
        linger, began = self.options.linger_s, time.monotonic()
        with self._cond:
            while self._outbox.unacknowledged and not self._peer_done and self._state in ("up", "down"):
                # linger_s once connected (from now, or from the reconnection); through a drop until its deadline
                end = self._deadline + linger if self._state == "down" else max(began, self._up_since) + linger
                now = time.monotonic()
                if now >= end:
                    log.info("closing the channel to %r with %d frame(s) it did not acknowledge", self.peer,
                             self._outbox.unacknowledged)
                    return
                self._cond.wait(min(_TICK_S, end - now))

    def _send_ack(self, link: TlsChannel, *, force: bool = False) -> None:
        with self._cond:
            received = self._inbound.received
            frames, nbytes = self._owed
            if received <= self._told or link is not self._link:
                return
            if not force and frames < ACK_EVERY_FRAMES and nbytes < ACK_EVERY_BYTES:
                return
            self._told, self._owed = received, (0, 0)
        self._write(link, (numbered.ack(received), b""))

    # -- receiving: in the caller's thread, or the link's background reader while nobody calls recv ----------------
    def _read_for(self, timeout: float | None) -> Item:
        """Read the current link in this thread until a frame (or the end) is queued; see the module docstring."""
        if timeout == 0:
            link = self._link
            if link is not None:
                link.read_some(0, self._inbox)
            item = self._inbox.take()
            if item is None:
                raise NothingYet
            return item
        end = float("inf") if timeout is None else time.monotonic() + timeout
        while (item := self._inbox.take()) is None:
            link = self._link
            if link is None or link.ended:  # reconnecting: the next link's background reader queues what comes
                item = self._inbox.get(min(self._left(end, timeout), _TICK_S))
                if item is not None:
                    return item
                continue
            with link.reading():  # one registration for the whole wait: the background reader stays out
                while not len(self._inbox) and link is self._link and not link.ended:
                    link.read_some(min(self._left(end, timeout), self.tick(link)), self._inbox)
        return item

    def _left(self, end: float, timeout: float | None) -> float:
        """Seconds left until ``end``; :class:`RecvTimeout` when none are, a closed channel raises."""
        if self._closing:
            raise TransportError(f"channel to {self.peer!r} is closed")
        left = end - time.monotonic()
        if left <= 0:
            raise RecvTimeout(f"no frame from {self.peer!r} within {timeout} s")
        return left

    # FrameSink: what the links read is handed here, in the thread that read it
    def frames_arrived(self, link: StreamChannel, frames: list[bytearray]) -> None:
        """Envelopes from ``link``: acks, numbered frames in order (duplicates dropped), the peer's goodbye."""
        self._last_arrival = time.monotonic()
        try:
            for frame in frames:
                self._handle(link, frame)  # type: ignore[arg-type]
        except ProtocolError as exc:
            self._fatal(exc)

    def link_ended(self, link: StreamChannel, exc: TransportError) -> None:
        """``link`` ended: a drop, unless it was replaced, the channel is closing or the peer said goodbye."""
        self._link_failed(link, exc)  # type: ignore[arg-type]

    def has_room(self) -> bool:
        """Whether the inbox has room for what the background reader would read."""
        return not self._inbox.full

    def tick(self, link: StreamChannel) -> float:
        """Send the ACK owed once nothing arrived for :data:`ACK_DELAY_S`; seconds until this is due again."""
        if self._inbound.received <= self._told:
            return _TICK_S
        quiet = time.monotonic() - self._last_arrival
        if quiet < ACK_DELAY_S:
            return ACK_DELAY_S - quiet
        self._send_ack(link, force=True)  # type: ignore[arg-type]
        return _TICK_S

    def _watch_deadline(self) -> None:
        """While the link is down: declare the peer lost when the deadline passes."""
        with self._cond:
            while self._state == "down" and not self._stop.is_set():
                left = self._deadline - time.monotonic()
                if left <= 0:
                    last = self.reconnects[-1].reason if self.reconnects else "no link"
                    self._end_locked(PeerLost(
                        f"the connection to {self.peer!r} dropped ({last}) and did not come back within "
                        f"{self.resume_options.timeout_s:g} s (network.reconnect_timeout_s); unless the run goes on "
                        "without it (SplitFed, FedAvg), it stops here: restart the parties with --resume to continue "
                        "from the last checkpoint"
                    ))
                    return
                self._cond.wait(left)

    def _handle(self, link: TlsChannel, frame: bytearray) -> None:
        env = numbered.parse(frame)
        if env.kind == numbered.RESUME:
            raise ProtocolError(f"{self.peer!r} sent a second resume handshake on one connection")
        with self._cond:
            if link is not self._link:
                return  # a late frame of a replaced link: the new link resends what counts
            freed = env.ack > self._outbox.acked
            self._outbox.acknowledge(env.ack)
            if freed:  # frames left the resend buffer: a sender or a close may wait on it
                self._cond.notify_all()
        if env.kind == numbered.ACK:
            return
        with self._deliver_lock:  # the reader of an old link may still wait for room with the frame before
            if not self._inbound.accept(env.seq):
                return
            if env.kind == numbered.GOODBYE:
                with self._cond:
                    self._peer_done = True
                    self._cond.notify_all()
                # acknowledge before the owner can see the close: once it sees it, it may close the link at once,
                # and a goodbye left unacknowledged makes the peer wait for a reconnection that never comes
                self._send_ack(link, force=True)
                self._inbox.put(PeerClosed(f"{self.peer!r} closed the channel"))
                return
            del frame[: numbered.OVERHEAD]
            with self._cond:
                frames, nbytes = self._owed
                self._owed = (frames + 1, nbytes + len(frame))
            self._inbox.put(frame)  # never blocks: a full inbox stops the link's reading instead
        self._send_ack(link)

    # -- links coming and going ------------------------------------------------------------------------------------
    def _link_failed(self, link: TlsChannel, exc: TransportError) -> None:
        down = redial = False
        with self._cond:
            if link is not self._link:
                return  # replaced already, or its failure is handled
            self._link = None
            # closing, a peer that ends its link cleanly (close_notify) without its own goodbye has had ours: it
            # says goodbye first otherwise, and frames arrive in order
            clean = self._closing and (not self._outbox.unacknowledged or isinstance(exc, PeerClosed))
            if self._peer_done or self._stop.is_set() or clean:
                self._state = "done"
            else:
                now = time.monotonic()
                self._state, self._deadline = "down", now + self.resume_options.timeout_s
                self.reconnects.append(Reconnect(reason=str(exc), dropped_at=now))
                down, redial = True, self._redial is not None
                log.warning("link to %r dropped (%s); %s for up to %g s", self.peer, exc,
                            "redialing" if redial else "waiting for it to reconnect", self.resume_options.timeout_s)
            self._cond.notify_all()
        link.close()
        if down:
            threading.Thread(target=self._watch_deadline, name=f"vsplit-deadline-{self.peer}", daemon=True).start()
        if redial:
            threading.Thread(target=self._redial_loop, name=f"vsplit-redial-{self.peer}", daemon=True).start()

    def _redial_loop(self) -> None:
        assert self._redial is not None
        pause = 0.0
        while True:
            with self._cond:
                left = self._deadline - time.monotonic()
                if self._state != "down" or self._stop.is_set() or left <= 0:
                    return
            if pause:
                time.sleep(min(pause * random.uniform(0.8, 1.2), left))  # jitter: partners do not redial in lockstep
            pause = min(max(2 * pause, _BACKOFF_START_S), _BACKOFF_MAX_S)
            left = self._deadline - time.monotonic()
            if left <= 0:
                return
            try:
                link, env = self._redial(left)
            except AuthenticationError as exc:
                log.warning("reconnecting to %r: %s", self.peer, exc)
                continue
            except TransportError as exc:
                log.info("reconnecting to %r: %s", self.peer, exc)
                continue
            if env.token != self.token:
                link.close()
                self._fatal(PeerLost(
                    f"{self.peer!r} answered the reconnection without this run's session (its process restarted?); "
                    "this run cannot continue: restart both parties with --resume"
                ))
                return
            try:
                installed = self._install(link, env.seq, announce=True)
            except TransportError as exc:
                link.close()
                log.info("reconnecting to %r: %s", self.peer, exc)
                continue
            if not installed:
                link.close()
            return

    def _install(self, link: TlsChannel, peer_received: int, *, announce: bool) -> bool:
        """Make ``link`` current: (dialing side: announce what we have,) drop what the peer has, resend the rest."""
        with self._send_lock:
            with self._cond:
                if self._state in ("lost", "done") or self._stop.is_set():
                    return False
            if announce:
                link.send(numbered.resume(self.token, self._inbound.received))
            with self._cond:
                if self._state in ("lost", "done") or self._stop.is_set():
                    return False
                try:
                    backlog = self._outbox.resume(peer_received)
                except ProtocolError as exc:
                    self._end_locked(exc)
                    return False
                old, self._link = self._link, link
                self._state = "up"
                now = self._up_since = time.monotonic()
                if self.reconnects and self.reconnects[-1].restored_at is None:
                    drop = self.reconnects[-1] = replace(self.reconnects[-1], restored_at=now, resent=len(backlog))
                else:  # the old link still looked alive here: the peer saw it die first
                    drop = Reconnect("replaced by a new connection", dropped_at=now, restored_at=now,
                                     resent=len(backlog))
                    self.reconnects.append(drop)
                self._cond.notify_all()
            link.attach(self)
            for envelope in backlog:
                try:
                    link.send_parts(*envelope)
                except TransportError as exc:
                    self._link_failed(link, exc)
                    break
        if old is not None:
            old.close()
        log.warning("link to %r restored after %.3f s; %d frame(s) resent", self.peer, now - drop.dropped_at,
                    len(backlog))
        return True

    def _fatal(self, exc: BaseException) -> None:
        with self._cond:
            link, self._link = self._link, None
            self._end_locked(exc)
        if link is not None:
            link.close()

    def _end_locked(self, exc: BaseException) -> None:
        """The channel is over (the caller holds the lock): ``recv`` raises ``exc`` after the frames that arrived."""
        if self._state in ("lost", "done"):
            return
        log.error("channel to %r: %s", self.peer, exc)
        self._state, self._failure = "lost", exc
        self._inbox.put(exc)  # type: ignore[arg-type]  # failures queue after the frames, as in a stream channel
        self._cond.notify_all()

    def _raise_if_lost(self) -> None:
        if self._state == "lost" and self._failure is not None:
            raise _again(self._failure)


def _again(exc: BaseException) -> BaseException:
    """A fresh copy of a queued failure, so each raise has its own traceback."""
    return type(exc)(str(exc))


__all__ = ["Reconnect", "ResumableChannel", "ResumeOptions", "link_options", "read_resume"]
