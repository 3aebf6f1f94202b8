"""The pump: the one loop that moves a machine's messages over channels.

Theory of operation. A :class:`Pump` belongs to one party. It encodes each :class:`Outgoing` into a frame stamped
with the session id and a per-peer sequence number, sends it on that peer's channel, and for each received frame
checks the session and that the sequence number is exactly the next one (so a replayed, dropped or foreign frame
fails loudly), decodes it and feeds it to the machine. If anything goes wrong, every open peer gets an
:class:`~vsplit.protocol.abort.Abort` carrying only a code (once; a hub passes one partner's abort on to the
others), and the local error is raised with the details.

A peer that closes its channel cleanly (:class:`~vsplit.transport.channel.PeerClosed`, raised only after its last
frame) has finished its part: the pump stops reading from it and carries on with the others, as a hub does while
one partner is done scoring and another is still sending. It is an error only if the machine still needed that
peer: at once if the machine says so (its optional ``expects(peer)``, see
:func:`~vsplit.protocol.machine.still_expects`), otherwise when the machine stalls, with no open peer left or
nothing from any peer within ``timeout``. A peer that vanishes (:class:`~vsplit.transport.channel.PeerLost`:
dropped, reset, silent) is always an error, and the other peers are told ``AbortCode.PEER_LOST``.

Several stages over one set of channels (horizontal schedules between processes, ``hold=True``): a machine that says
it no longer expects a peer (its ``expects(peer)``) is not fed that peer's frames; they wait, in order, in the
channel for the stage they belong to. With ``drops=True`` a peer that vanishes while the machine expects it is not
an error if the machine has ``drop(peer)``: the pump tells the machine, which carries on without it (a SplitFed
round completes without a lost client), and records the peer in :attr:`Pump.lost`. With ``returns`` (a callable
giving ``(peer, channel)`` pairs: a lost peer that connected again as a new process, see
:mod:`vsplit.horizontal.readmit`), the pump swaps in the new channel with fresh sequence numbers, treats the old
process as lost if it had not noticed yet, and tells the machine (its ``returned(peer)``), which may take the new
process's first message; a machine without ``returned`` that still expects the peer fails as on a loss.

Both runtimes share it: :func:`Pump.run` blocks on the channels (one party per process), while the in-process
runtime (:mod:`vsplit.runtime.inprocess`) calls :meth:`Pump.poll` on every party in turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from vsplit.errors import AlignmentError, DataError, ProtocolError, RemoteAbort, TransportError, VsplitError
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.protocol.machine import Machine, Outgoing, still_expects
from vsplit.protocol.message import Message
from vsplit.runtime.stats import CommStats
from vsplit.transport import codec
from vsplit.transport.channel import Channel, NothingYet, PeerClosed, PeerLost

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
        hold: bool = False,
        drops: bool = False,
        returns: Callable[[], list[tuple[str, Channel]]] | None = None,
    ) -> None:
        self.me = me
        self.hold = hold
        self.drops = drops
        self.returns = returns
        #: peers that vanished and were dropped by the machine (``drops=True``), in order
        self.lost: list[str] = []
        #: peers that came back as a new process on a new channel (``returns``), in order
        self.returned: list[str] = []
        self.channels = dict(channels)
        self.session = session
        self.stats = stats if stats is not None else CommStats()
        self.taps = list(taps)
        self.timeout = timeout
        self._sent_seq = dict.fromkeys(self.channels, 0)
        self._recv_seq = dict.fromkeys(self.channels, 0)
        self._order = list(self.channels)  # the peers still open, polled in turn
        self._next = 0
        self.closed: list[str] = []  # peers that closed their channel cleanly, in the order they did
        self._aborted = False
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
            error = RemoteAbort(f"{peer} aborted: {msg.reason} (code {msg.code})", code=msg.code)
            error.peer = peer  # type: ignore[attr-defined]  # the others are told, not the peer that aborted
            raise error
        assert self.machine is not None, "deliver() needs a machine: call begin() first"
        self.send_all(self.machine.receive(peer, msg))

    def begin(self, machine: Machine) -> None:
        """Make ``machine`` current and send what it says first."""
        self.machine = machine
        self.guard(lambda: (self.send_all(machine.start()), self._check_closed()))

    def poll(self) -> bool:
        """Take at most one waiting frame or clean close without blocking; return whether one was taken."""
        return bool(self.guard(self._poll_once))

    def _poll_once(self) -> bool:
        if self.returns is not None:
            for peer, channel in self.returns():
                self._swap(peer, channel)
        for _ in range(len(self._order)):
            peer = self._order[self._next]
            self._next = (self._next + 1) % len(self._order)
            if self.hold and self.machine is not None and not still_expects(self.machine, peer):
                continue  # its frames belong to a later stage
            if self._take(peer, timeout=0):
                return True
        self._check_closed()
        return False

    def _take(self, peer: str, *, timeout: float) -> bool:
        """Deliver the next frame from ``peer`` or register its clean close; False if nothing is waiting."""
        try:
            frame = self.channels[peer].recv(timeout=timeout)
        except NothingYet:
            return False
        except PeerLost:
            drop = getattr(self.machine, "drop", None)
            if not self.drops or drop is None:
                raise
            self._order.remove(peer)
            self._next = 0
            self.lost.append(peer)
            self.send_all(drop(peer))
            return True
        except PeerClosed:
            self._order.remove(peer)
            self._next = 0
            self.closed.append(peer)
            self._check_closed()
            return True
        self.deliver(peer, frame)
        return True

    def _swap(self, peer: str, channel: Channel) -> None:
        """``peer`` came back as a new process on ``channel``: the old channel goes, the numbering starts again."""
        if peer not in self.channels:
            raise ProtocolError(f"{self.me}: {peer!r} is not a peer of this run", local=True)
        machine = self.machine
        if peer in self._order:  # the old process was lost, and this pump had not read so yet
            self._order.remove(peer)
            self._next = 0
            if peer not in self.lost:
                self.lost.append(peer)
        old, self.channels[peer] = self.channels[peer], channel
        if old is not channel:
            old.close()
        self._sent_seq[peer] = self._recv_seq[peer] = 0
        self._order.append(peer)
        self.returned.append(peer)
        hook = getattr(machine, "returned", None)
        if hook is not None:
            self.send_all(hook(peer))
        elif machine is not None and not machine.done and still_expects(machine, peer):
            raise PeerLost(f"{self.me}: {peer!r} restarted while this stage still expected messages from it")

    def _check_closed(self) -> None:
        """Raise if the current machine still needs a peer that has closed (see the module docstring)."""
        machine = self.machine
        if machine is None or machine.done or not self.closed:
            return
        says = hasattr(machine, "expects")
        waited_for = [p for p in self.closed if still_expects(machine, p)]
        if waited_for and (says or not self._order):
            names = ", ".join(repr(p) for p in waited_for)
            raise PeerLost(
                f"{self.me}: {names} closed the channel while this party still expected messages from it: its run "
                "ended early or runs other settings; see its log (is its config the same run?)"
            )
        if not self._order:
            raise PeerLost(f"{self.me}: every peer closed its channel before {type(machine).__name__} was done")

    def run(self, machine: Machine) -> Any:
        """Run ``machine`` to completion, blocking on the channels; return its result."""
        self.begin(machine)
        deadline_quiet = self.timeout
        while not machine.done:
            if len(self.channels) == 1 and self._order and (not self.hold or still_expects(machine, self._order[0])):
                # one peer: block on it (after a close: poll, see below)
                peer = self._order[0]
                self.guard(lambda p=peer: self._take(p, timeout=deadline_quiet))
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
        earlier = ""
        if self.closed:
            earlier = f"; {', '.join(repr(p) for p in self.closed)} closed the channel earlier, perhaps too early"
        raise TransportError(f"{self.me}: no message from any peer within {self.timeout} s{earlier}")

    # -- failure ---------------------------------------------------------------------------------------------------
    def guard(self, action: Callable[[], Any]) -> Any:
        """Run ``action``; on failure tell every peer an abort code and re-raise the local error."""
        try:
            return action()
        except Exception as exc:
            self.fail(exc)
            raise

    def fail(self, exc: BaseException) -> None:
        """Tell every open peer that this party stops because of ``exc``: its code; an abort received is passed on.

        The peer that sent an abort is not told again, so a hub relays one partner's abort to the other partners.
        """
        self.abort(code_for(exc), skip=getattr(exc, "peer", None) if isinstance(exc, RemoteAbort) else None)

    def abort(self, code: AbortCode, *, skip: str | None = None) -> None:
        """Send ``Abort(code)`` once to every open peer but ``skip``, ignoring peers that are already gone."""
        if self._aborted:
            return
        self._aborted = True
        for peer in self._order:
            if peer == skip:
                continue
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
