"""A client that was lost in a SplitFed or FedAvg run comes back: the run re-admits it at the next round.

Theory of operation. A bank whose process dies mid-round is dropped (the round finishes without it, see
:mod:`vsplit.horizontal.session`). Its operator restarts it with ``--resume``: it reloads its run key (the X25519 key
it signed at the join, so the other banks' checks and the secure-aggregation masks still hold), connects again as a
new process (the listeners hand the new channel to the pump, :meth:`vsplit.runtime.pump.Pump._swap`) and sends the
server the same :class:`~vsplit.horizontal.join.Join` as at the start. Then:

1. The **server** checks that the join is the one the client joined with (rows, segment digest, state size, key,
   labels) and answers with the run's roster, ``start_round`` set to the round after the one it is in and
   ``readmitted=1``. A join that differs is refused with an abort code; the client stays out.
2. The client forwards that roster to a separate **federated server**, which checks it against the roster it holds.
3. Whoever averages (the federated server, else the server) sends the client, once the average of the round before
   its first round is known, that average (a :class:`~vsplit.horizontal.messages.SegmentState`; under secure
   aggregation one float64 vector ``flat``, which the client unflattens with its own layout). The client loads it,
   tells the server :class:`Ready` (SplitFed), and trains from that round on with everyone else.

The server waits for ``Ready`` before it starts the client's first round, so no bank trains that round before the
federated server knows the client is back; a roster forwarded late (the federated server already in that round's
average) admits the client into the aggregation still collecting keys (:meth:`SecAggServer.admit`). Every piece is
sans-IO: :class:`Readmission` keeps the book, :class:`Admitting` wraps each stage machine of the server or federated
server so that a returned client's first message is taken whatever stage is running.

Example:
    >>> book = Readmission(gone={"b"}, rounds=5, joins_now=False)
    >>> sorted(book.waiting()), book.admit("b", 3), sorted(book.waiting()), book.due(2)
    (['b'], 3, [], ['b'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message, require


@message(0x0405)
@dataclass(frozen=True)
class Ready(Message):
    """A readmitted client has loaded the average and trains from ``round`` on."""

    round: int

    def __post_init__(self) -> None:
        require(self.round >= 1, "a client is readmitted at round 1 or later")


@dataclass
class Readmission:
    """One party's book of clients that were lost and came back.

    Attributes:
        gone: the session's set of clients left out of stages (shared: the book removes a client once it is back).
        rounds: the run's rounds (a client cannot come back after the last has started).
        joins_now: this party averages and has no training stage of its own (a separate federated server, a FedAvg
            server), so a client counts again once it has its catch-up; else it counts once it said :class:`Ready`.
        admitted: client -> the round it trains again from.
        back: client -> that round, once it is back (for the report).
        last: the last average this party computed, as the catch-up message, and its round.
    """

    gone: set[str]
    rounds: int
    joins_now: bool
    admitted: dict[str, int] = field(default_factory=dict)
    back: dict[str, int] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    sent: set[str] = field(default_factory=set)
    last: tuple[int, Message] | None = None

    def waiting(self) -> set[str]:
        """Clients whose first message after coming back is still to be taken."""
        return self.gone - set(self.admitted) - self.refused

    def returned(self, client: str) -> None:
        """``client`` connected again as a new process: whatever it had agreed before is void."""
        self.gone.add(client)
        self.admitted.pop(client, None)
        self.refused.discard(client)
        self.sent.discard(client)

    def admit(self, client: str, round_: int) -> int:
        """Admit ``client`` from ``round_`` on; the round."""
        self.admitted[client] = round_
        return round_

    def forget(self, client: str) -> None:
        """``client`` was lost again before it was back: it stays out."""
        self.admitted.pop(client, None)
        self.sent.discard(client)

    def due(self, finished: int) -> list[str]:
        """Clients that need the average of round ``finished`` (their first round is the next), not yet sent."""
        return sorted(c for c, r in self.admitted.items() if r == finished + 1 and c not in self.sent)

    def catch_ups(self, finished: int, state: Message) -> list[Outgoing]:
        """Keep ``state`` (the average of round ``finished``) and send it to every client :meth:`due` it."""
        self.last = (finished, state)
        out = []
        for client in self.due(finished):
            out.append(Outgoing(client, state))
            self.sent.add(client)
            if self.joins_now:
                self.welcome(client)
        return out

    def welcome(self, client: str) -> None:
        """``client`` is back: it takes part in every stage from its round on."""
        self.gone.discard(client)
        self.back[client] = self.admitted[client]

    def ready_for(self, round_: int) -> list[str]:
        """Clients the server waits for (their :class:`Ready`) before training round ``round_``."""
        return sorted(c for c, r in self.admitted.items() if r == round_ and c in self.gone)


class Admitting:
    """A stage machine of the server or federated server that also takes returned clients' first message.

    ``take(sender, msg, round_)`` answers that message (see :func:`server_take`, :func:`federated_take`). Messages
    the stage machine sends to a client that came back during this stage are dropped: they were meant for its
    earlier process."""

    def __init__(self, inner: Any, book: Readmission, round_: int,
                 take: Callable[[str, Message, int, Any], list[Outgoing]]) -> None:
        self.inner, self.book, self.round, self._take = inner, book, round_, take
        self._stale: set[str] = set()

    @property
    def done(self) -> bool:
        return bool(self.inner.done)

    @property
    def result(self) -> Any:
        return self.inner.result

    def _inner_expects(self, peer: str) -> bool:
        ask = getattr(self.inner, "expects", None)
        return bool(ask(peer)) if ask is not None else not self.inner.done

    def expects(self, peer: str) -> bool:
        return self._inner_expects(peer) or peer in self.book.waiting()

    def start(self) -> list[Outgoing]:
        return self._filter(self.inner.start())

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if sender in self.book.waiting() and not self._inner_expects(sender):
            return self._take(sender, msg, self.round, self.inner)
        return self._filter(self.inner.receive(sender, msg))

    def drop(self, peer: str) -> list[Outgoing]:
        if peer in self.book.gone:  # a returned process lost again before it was back
            self.book.forget(peer)
            self.book.refused.add(peer)
            drop = getattr(self.inner, "drop", None)
            return self._filter(drop(peer)) if drop is not None and self._inner_expects(peer) else []
        drop = getattr(self.inner, "drop", None)
        if drop is None:
            raise ProtocolError(f"{peer!r} was lost in a stage that cannot go on without it", local=True)
        return self._filter(drop(peer))

    def returned(self, peer: str) -> list[Outgoing]:
        """``peer`` connected again as a new process: its earlier process is lost to this stage."""
        out: list[Outgoing] = []
        drop = getattr(self.inner, "drop", None)
        if drop is not None and self._inner_expects(peer):
            out = drop(peer)
        self.book.returned(peer)
        self._stale.add(peer)
        return self._filter(out)

    def _filter(self, out: Iterable[Outgoing]) -> list[Outgoing]:
        return [o for o in out if o.to not in self._stale]


def refuse(book: Readmission, client: str, why: str, log: Callable[[str], None]) -> list[Outgoing]:
    """Leave ``client`` out (it is told only a code) and log why."""
    book.refused.add(client)
    log(f"refused {client!r} coming back: {why}")
    return [Outgoing(client, Abort(code=int(AbortCode.CONFIG_MISMATCH)))]


def server_take(book: Readmission, *, check: Callable[[str, Message], str | None], roster: Callable[[int], Message],
                log: Callable[[str], None]) -> Callable[[str, Message, int, Any], list[Outgoing]]:
    """The server's answer to a returned client's :class:`Join`: the roster from the next round on, or a refusal."""

    def take(sender: str, msg: Message, round_: int, inner: Any) -> list[Outgoing]:
        why = check(sender, msg)
        start = round_ + 1
        if why is None and start >= book.rounds:
            why = f"the run is in its last round ({round_})"
        if why is not None:
            return refuse(book, sender, why, log)
        book.admit(sender, start)
        log(f"{sender!r} came back: it trains again from round {start}")
        return [Outgoing(sender, roster(start))]

    return take


def federated_take(book: Readmission, *, check: Callable[[str, Message], str | None],
                   log: Callable[[str], None]) -> Callable[[str, Message, int, Any], list[Outgoing]]:
    """A separate federated server's answer to a returned client's forwarded roster (see the module docstring)."""

    def take(sender: str, msg: Message, round_: int, inner: Any) -> list[Outgoing]:
        why = check(sender, msg)
        start = int(getattr(msg, "start_round", -1))
        if why is None and start < round_:
            why = f"the server readmitted it at round {start}, and this party averages round {round_} already"
        if why is None and start == round_:  # the server waits for its Ready: this average still collects
            admit = getattr(inner, "admit", None)
            if book.last is None or book.last[0] != round_ - 1 or admit is None or not admit(sender):
                why = f"round {round_}'s average has gone too far to take it in"
        if why is not None:
            return refuse(book, sender, why, log)
        book.admit(sender, start)
        log(f"{sender!r} came back: it averages again from round {start}")
        if start == round_:
            assert book.last is not None
            book.sent.add(sender)
            book.welcome(sender)
            return [Outgoing(sender, book.last[1])]
        return []

    return take


class SendAll:
    """Sends the given messages and is done."""

    def __init__(self, out: Iterable[Outgoing]) -> None:
        self.out, self.done, self.result = list(out), False, None

    def start(self) -> list[Outgoing]:
        self.done = True
        return self.out

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        raise ProtocolError(f"{type(msg).__name__} from {sender!r} not expected now")


class AwaitReady:
    """The server before a round: waits for :class:`Ready` from each client readmitted at that round; a client
    lost meanwhile stays out. ``result``: the clients that are back."""

    def __init__(self, clients: Iterable[str], round_: int) -> None:
        self.waiting, self.round = set(clients), round_
        self.ready: list[str] = []
        self.dropped: list[str] = []
        self.result: list[str] = self.ready

    @property
    def done(self) -> bool:
        return not self.waiting

    def start(self) -> list[Outgoing]:
        return []

    def expects(self, peer: str) -> bool:
        return peer in self.waiting

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if sender not in self.waiting or not isinstance(msg, Ready) or msg.round != self.round:
            raise ProtocolError(f"readmission: {type(msg).__name__} from {sender!r} not expected now")
        self.waiting.discard(sender)
        self.ready.append(sender)
        return []

    def drop(self, client: str) -> list[Outgoing]:
        if client in self.waiting:
            self.waiting.discard(client)
            self.dropped.append(client)
        return []


def catch_up_state(round_: int, rows: int, mean: Mapping[str, np.ndarray] | np.ndarray):
    """The catch-up message for the average of ``round_``: the named mean arrays, or (secure aggregation) the flat
    mean vector under the name ``flat``."""
    from vsplit.horizontal.messages import SegmentState

    arrays = {"flat": np.asarray(mean, np.float64)} if isinstance(mean, np.ndarray) else dict(mean)
    return SegmentState.pack(round=round_, rows=rows, arrays=arrays)


__all__ = ["Admitting", "AwaitReady", "Readmission", "Ready", "SendAll", "catch_up_state", "federated_take",
           "server_take"]
