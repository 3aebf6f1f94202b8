"""Sans-IO machines of horizontal schedules: the server's hub over many clients, hand-offs and averages.

Theory of operation. Training itself is the ordinary :class:`~vsplit.protocol.training.SplitMachine` of each client's
pairwise topology. A :class:`Hub` lets the server run one such machine per client at once over one pump (one shared
inbox): a message from client ``c`` goes to ``c``'s machine and nowhere else. In SplitFed v1 each machine has its own
server-side copy and the hub forwards at once. In SplitFed v2 the machines share one server-side model and one
optimizer (:class:`SharedStep`, which clears the gradients after every step), and the hub enforces the schedule's
server order: a client's activations or gradients wait in the hub until the server's next step is that client's, so
in-process and multi-process runs make the same steps in the same order. The hub owns the shared modules' train mode
while the machines run. Every wait is bounded: a client may have at most :data:`MAX_HELD` messages held.

The other machines move one :class:`~vsplit.horizontal.messages.SegmentState` each: :class:`Send` and
:class:`Receive` (a hand-off), :class:`Relay` (the server forwarding a hand-off it does not keep), and
:class:`Upload` / :class:`Aggregate` (every client's state to the federated server and the row-weighted average back).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.errors import ProtocolError
from vsplit.horizontal.messages import SealedState, SegmentState
from vsplit.models.optim import clear_grads
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.protocol.training.messages import (
    Activations,
    Gradients,
    PackedActivations,
    PackedGradients,
    SparseGradients,
)

#: Messages from one client the hub may hold while the server serves the others.
MAX_HELD = 16
_TENSORS = (Activations, PackedActivations, Gradients, PackedGradients, SparseGradients)


class SharedStep:
    """One optimizer shared by several machines: steps it, then clears the gradients and counts the step."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.steps = 0

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def step(self) -> None:
        self.optimizer.step()
        clear_grads(self.optimizer)
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)


class Hub:
    """The server's machines, one per client, over one pump; ``order`` (with ``counter``) fixes whose batch the
    server takes at each step of a shared model (``None``: every message is forwarded at once)."""

    def __init__(
        self,
        machines: Mapping[str, Any],
        *,
        order: Sequence[str] | None = None,
        counter: SharedStep | None = None,
        shared: Sequence[nn.Module] = (),
    ) -> None:
        if order is not None and counter is None:
            raise ProtocolError("an ordered hub needs the shared optimizer's step counter", local=True)
        self.machines = dict(machines)
        self.order = list(order) if order is not None else None
        self.counter = counter
        self.shared = list(shared)
        self._held: dict[str, deque[Message]] = {c: deque() for c in self.machines}
        self._first = counter.steps if counter is not None else 0
        #: clients whose link was lost during this stage (:meth:`drop`), in order
        self.dropped: list[str] = []

    @property
    def done(self) -> bool:
        return all(m.done for m in self.machines.values())

    @property
    def result(self) -> dict[str, Any]:
        return {c: m.result for c, m in self.machines.items()}

    def expects(self, peer: str) -> bool:
        machine = self.machines.get(peer)
        ask = getattr(machine, "expects", None)
        return machine is not None and (ask(peer) if ask is not None else not machine.done)

    def start(self) -> list[Outgoing]:
        out: list[Outgoing] = []
        for machine in self.machines.values():
            out += machine.start()
        return out + self._settle()

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        machine = self.machines.get(sender)
        if machine is None:
            raise ProtocolError(f"hub: message from {sender!r}, which is not a client of this stage")
        current = self._current()
        if current is not None and sender != current and isinstance(msg, _TENSORS):
            held = self._held[sender]
            if len(held) >= MAX_HELD:
                raise ProtocolError(f"hub: {sender!r} sent more than {MAX_HELD} messages ahead of its turn",
                                    code=AbortCode.PROTOCOL_VIOLATION)
            held.append(msg)
            return []
        out = machine.receive(sender, msg)
        return out + self._drain()

    def drop(self, client: str) -> list[Outgoing]:
        """``client``'s link is lost: finish the stage without it (SplitFed). Its machine and held messages go; in
        an ordered hub its remaining turns are skipped, the others keep their order."""
        if client not in self.machines:
            return []
        del self.machines[client]
        self._held.pop(client, None)
        self.dropped.append(client)
        if self.order is not None:
            assert self.counter is not None
            k = self.counter.steps - self._first
            self.order = self.order[:k] + [c for c in self.order[k:] if c != client]
        return self._drain()

    def _current(self) -> str | None:
        if self.order is None:
            return None
        assert self.counter is not None
        k = self.counter.steps - self._first
        return self.order[k] if k < len(self.order) else None

    def _drain(self) -> list[Outgoing]:
        """Deliver held messages whose turn has come."""
        out: list[Outgoing] = []
        while True:
            current = self._current()
            queues = [current] if current is not None else [c for c, q in self._held.items() if q]
            ready = [c for c in queues if self._held[c]]
            if not ready:
                break
            c = ready[0]
            out += self.machines[c].receive(c, self._held[c].popleft())
        return out + self._settle()

    def _settle(self) -> list[Outgoing]:
        """The shared modules stay in training mode until every machine is done (a machine that finishes sets its
        own modules to eval mode, which are also the others')."""
        mode = not self.done
        for module in self.shared:
            module.train(mode)
        return []


class Send:
    """Sends one state to ``to`` and is done."""

    def __init__(self, to: str, state: SegmentState) -> None:
        self.to, self.state = to, state
        self.done, self.result = False, None

    def start(self) -> list[Outgoing]:
        self.done = True
        return [Outgoing(self.to, self.state)]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        raise ProtocolError(f"{type(msg).__name__} from {sender!r} not expected after a hand-off was sent")


class Receive:
    """Waits for one state of round ``round`` from ``sender`` (a :class:`SegmentState`, or with ``sealed`` a
    :class:`SealedState`); its result is the message."""

    def __init__(self, sender: str, *, round: int, sealed: bool = False) -> None:
        self.sender, self.round = sender, round
        self.kind: type[Message] = SealedState if sealed else SegmentState
        self.done, self.result = False, None

    def start(self) -> list[Outgoing]:
        return []

    def expects(self, peer: str) -> bool:
        return not self.done and peer == self.sender

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if self.done or sender != self.sender or type(msg) is not self.kind or msg.round != self.round:  # type: ignore[attr-defined]
            raise ProtocolError(f"{type(msg).__name__} from {sender!r} not expected now (waiting for the state of "
                                f"round {self.round} from {self.sender!r})")
        self.done, self.result = True, msg
        return []


class Relay:
    """The server forwarding one hand-off from ``sender`` to ``to`` (it keeps nothing; ``sealed``: the hand-off must
    be encrypted for ``to``)."""

    def __init__(self, sender: str, to: str, *, round: int, sealed: bool = False) -> None:
        self._inner = Receive(sender, round=round, sealed=sealed)
        self.sender, self.to = sender, to
        self.result = None

    @property
    def done(self) -> bool:
        return self._inner.done

    def start(self) -> list[Outgoing]:
        return []

    def expects(self, peer: str) -> bool:
        return self._inner.expects(peer)

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        self._inner.receive(sender, msg)
        if isinstance(msg, SealedState) and (msg.sender, msg.recipient) != (self.sender, self.to):
            raise ProtocolError(f"relay: {sender!r} sealed a hand-off for {msg.recipient!r}, the schedule says "
                                f"{self.to!r}")
        return [Outgoing(self.to, msg)]


class Upload:
    """A client: sends its state to the federated server ``to``; its result is the average that comes back."""

    def __init__(self, to: str, state: SegmentState) -> None:
        self._send = Send(to, state)
        self._receive = Receive(to, round=state.round)

    @property
    def done(self) -> bool:
        return self._receive.done

    @property
    def result(self) -> SegmentState | None:
        return self._receive.result

    def start(self) -> list[Outgoing]:
        return self._send.start()

    def expects(self, peer: str) -> bool:
        return self._receive.expects(peer)

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        return self._receive.receive(sender, msg)


class Aggregate:
    """The federated server: one state per client (from clients with the agreed ``rows``), then the row-weighted
    average back to each; ``average`` is the averaging function (the one seam)."""

    def __init__(
        self,
        rows: Mapping[str, int],
        *,
        round: int,
        average: Callable[[Sequence[Mapping[str, np.ndarray]], Sequence[float]], dict[str, np.ndarray]],
        reserve: Mapping[str, int] | None = None,
    ) -> None:
        self.rows, self.round, self._average = dict(rows), round, average
        self.reserve = dict(reserve or {})  # rows of clients that may be admitted back (:meth:`admit`)
        self._got: dict[str, dict[str, np.ndarray]] = {}
        self.done, self.result = False, None
        #: clients whose link was lost before their state arrived (:meth:`drop`)
        self.dropped: list[str] = []

    def start(self) -> list[Outgoing]:
        return []

    def expects(self, peer: str) -> bool:
        return not self.done and peer in self.rows and peer not in self._got

    def drop(self, client: str) -> list[Outgoing]:
        """``client``'s link is lost: average the others' states by their rows (its state, if it arrived, stays
        out too: it will not receive the average)."""
        if self.done or client not in self.rows:
            return []
        del self.rows[client]
        self._got.pop(client, None)
        self.dropped.append(client)
        if not self.rows:
            raise ProtocolError("aggregate: every client of the round was lost", local=True)
        return self._maybe_finish()

    def admit(self, client: str) -> bool:
        """Take ``client`` (in ``reserve``) back in before the average is done; whether it was taken."""
        if self.done or client not in self.reserve:
            return False
        self.rows[client] = self.reserve[client]
        return True

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if not self.expects(sender) or not isinstance(msg, SegmentState) or msg.round != self.round:
            raise ProtocolError(f"aggregate: {type(msg).__name__} from {sender!r} not expected now")
        if msg.rows != self.rows[sender]:
            raise ProtocolError(f"aggregate: {sender!r} claims {msg.rows} rows, the schedule gives it "
                                f"{self.rows[sender]}", code=AbortCode.CONFIG_MISMATCH)
        self._got[sender] = msg.arrays()
        return self._maybe_finish()

    def _maybe_finish(self) -> list[Outgoing]:
        if len(self._got) < len(self.rows):
            return []
        clients = list(self.rows)
        mean = self._average([self._got[c] for c in clients], [self.rows[c] for c in clients])
        reply = SegmentState.pack(round=self.round, rows=sum(self.rows.values()), arrays=mean)
        self.done, self.result = True, mean
        return [Outgoing(c, reply) for c in clients]
