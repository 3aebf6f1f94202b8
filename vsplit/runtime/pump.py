"""The pump: the one loop that moves a machine's messages over channels.

Theory of operation. A :class:`Pump` belongs to one party. It encodes each :class:`Outgoing` into a frame stamped
with the session id and a per-peer sequence number, sends it on that peer's channel, and for each received frame
checks the session and that the sequence number is exactly the next one (so a replayed, dropped or foreign frame
fails loudly), decodes it and feeds it to the machine. If anything goes wrong, every peer gets an
:class:`~vsplit.protocol.abort.Abort` carrying only a code, and the local error is raised with the details.

Both runtimes share it: :func:`Pump.run` blocks on the channels (one party per process), while the in-process
runtime (:mod:`vsplit.runtime.inprocess`) calls :meth:`Pump.poll` on every party in turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from vsplit.errors import AlignmentError, DataError, ProtocolError, RemoteAbort, TransportError, VsplitError
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.protocol.machine import Machine, Outgoing
from vsplit.protocol.message import Message
from vsplit.runtime.stats import CommStats
from vsplit.transport import codec
from vsplit.transport.channel import Channel, NothingYet

#: A tap sees every frame a party sends: ``tap(sender, recipient, message, frame)``.
Tap = Callable[[str, str, Message, bytearray], None]


class Pump:
    """Runs machines for party ``me`` over ``channels`` (peer name -> channel)."""

    def __init__(
        self,
        me: str,
        channels: dict[str, Channel],
        *,
        session: bytes,
        stats: CommStats | None = None,
        taps: Iterable[Tap] = (),
        timeout: float = 300.0,
    ) -> None:
        self.me = me
        self.channels = dict(channels)
        self.session = session
        self.stats = stats if stats is not None else CommStats()
        self.taps = list(taps)
        self.timeout = timeout
        self._sent_seq = dict.fromkeys(self.channels, 0)
        self._recv_seq = dict.fromkeys(self.channels, 0)
        self._order = list(self.channels)
        self._next = 0
        self.machine: Machine | None = None

    # -- sending ---------------------------------------------------------------------------------------------------
    def send(self, out: Outgoing) -> None:
        """Encode and send one message."""
        to, msg = out
        channel = self.channels.get(to)
        if channel is None:
            raise ProtocolError(f"{self.me}: no channel to party {to!r}", local=True)
        seq = self._sent_seq[to]
        frame = codec.encode(msg, session=self.session, seq=seq)
        self._sent_seq[to] = seq + 1
        for tap in self.taps:
            tap(self.me, to, msg, frame)
        channel.send(frame)
        self.stats.record("sent", to, type(msg).__name__, len(frame))

    def send_all(self, outgoing: Iterable[Outgoing]) -> None:
        """Send each message in order."""
        for out in outgoing:
            self.send(out)

    # -- receiving -------------------------------------------------------------------------------------------------
    def deliver(self, peer: str, frame: bytes | bytearray) -> None:
        """Check and decode one frame from ``peer``, feed it to the current machine, send the answers."""
        header = codec.decode_header(frame)
        if header.session != self.session:
            raise ProtocolError(
                f"{self.me}: frame from {peer!r} belongs to another session; both sides must use the same run id"
            )
        if header.seq != self._recv_seq[peer]:
            raise ProtocolError(
                f"{self.me}: frame {header.seq} from {peer!r} out of order "
                f"(expected {self._recv_seq[peer]}): replayed or lost"
            )
        msg = codec.decode_body(header, frame)
        self._recv_seq[peer] += 1
        self.stats.record("received", peer, type(msg).__name__, len(frame))
        if isinstance(msg, Abort):
            raise RemoteAbort(f"{peer} aborted: {msg.reason} (code {msg.code})", code=msg.code)
        assert self.machine is not None, "deliver() needs a machine: call begin() first"
        self.send_all(self.machine.receive(peer, msg))

    def begin(self, machine: Machine) -> None:
        """Make ``machine`` current and send what it says first."""
        self.machine = machine
        self.guard(lambda: self.send_all(machine.start()))

    def poll(self) -> bool:
        """Deliver at most one waiting frame without blocking; return whether one was delivered."""
        for _ in range(len(self._order)):
            peer = self._order[self._next]
            self._next = (self._next + 1) % len(self._order)
            try:
                frame = self.channels[peer].recv(timeout=0)
            except NothingYet:
                continue
            try:
                self.deliver(peer, frame)
            except Exception as exc:
                self._failed(exc)
                raise
            return True
        return False

    def run(self, machine: Machine) -> Any:
        """Run ``machine`` to completion, blocking on the channels; return its result."""
        self.begin(machine)
        deadline_quiet = self.timeout
        while not machine.done:
            if len(self._order) == 1:
                peer = self._order[0]
                frame = self.guard(lambda p=peer: self.channels[p].recv(timeout=deadline_quiet))
                self.guard(lambda p=peer, f=frame: self.deliver(p, f))
                continue
            waited, pause = 0.0, 5e-5
            while not self.poll():
                if waited > deadline_quiet:
                    self.guard(self._timed_out)
                time.sleep(pause)
                waited += pause
                pause = min(pause * 2, 2e-3)
        return machine.result

    def _timed_out(self) -> None:
        raise TransportError(f"{self.me}: no message from any peer within {self.timeout} s")

    # -- failure ---------------------------------------------------------------------------------------------------
    def guard(self, action: Callable[[], Any]) -> Any:
        """Run ``action``; on failure tell every peer an abort code and re-raise the local error."""
        try:
            return action()
        except Exception as exc:
            self._failed(exc)
            raise

    def _failed(self, exc: Exception) -> None:
        if not isinstance(exc, RemoteAbort):  # the peer that aborted already told everyone
            self.abort(code_for(exc))

    def abort(self, code: AbortCode) -> None:
        """Send ``Abort(code)`` to every peer, ignoring peers that are already gone."""
        for peer in self._order:
            try:
                self.send(Outgoing(peer, Abort(code=int(code))))
            except (VsplitError, OSError):
                pass


def code_for(exc: BaseException) -> AbortCode:
    """The abort code a peer is told for local error ``exc``."""
    code = getattr(exc, "code", None)
    if isinstance(exc, VsplitError) and code in AbortCode._value2member_map_:
        return AbortCode(code)
    if isinstance(exc, ProtocolError):
        return AbortCode.PROTOCOL_VIOLATION
    if isinstance(exc, (DataError, AlignmentError)):
        return AbortCode.BAD_DATA
    if isinstance(exc, TransportError):
        return AbortCode.TIMEOUT
    if isinstance(exc, KeyboardInterrupt):
        return AbortCode.CANCELLED
    return AbortCode.INTERNAL_ERROR
