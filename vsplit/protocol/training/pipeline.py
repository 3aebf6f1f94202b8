"""Several training steps in flight at a source party: a pipeline window, or local steps on cached gradients.

Theory of operation. In the exact mode a party that only sends activations (a vertical partner, a vanilla client)
runs step ``t`` as forward, send, *wait one round trip* for the gradient, backward, optimizer step. Over a WAN the
wait dominates. The plan's two options let such a party send ahead; the party that holds the loss (the coordinator)
still runs every step in order, at once, with fresh weights of its own, so all staleness sits at the source parties:

``window = w`` (pipelining, as in PipeDream's weight stashing). The party keeps up to ``w`` steps in flight: it sends
the activations of steps ``t .. t+w-1`` before the gradient of step ``t`` comes back. Each step's forward runs on a
*stash* (a copy of the parameters taken at that forward), so its backward is the exact gradient at the weights that
produced the activations; that gradient is applied to the current weights. The forward of step ``t`` therefore uses
the weights after updates ``0 .. t-w`` (``w - 1`` updates stale), and update ``t`` applies the gradient of the loss
at those stale weights. ``w = 1`` is the exact mode (and runs the exact code path, without stashes).

``local_steps = k`` (FedBCD / CELU-style local updates). Batches go in groups of ``k``: the party sends the
activations of the whole group with the weights at its start (one round trip per group instead of per batch), then
takes one optimizer step per batch as its gradients come back: the first on the graph that produced the
activations (exact), each later one on a *fresh* forward with the current weights, back-propagating the cached
gradient the coordinator computed for the group-start activations (stale by ``i`` updates for the ``i``-th batch
of the group). The coordinator's steps for the group use the group-start activations (stale by ``i`` of the
party's updates). A fresh forward draws dropout masks again, so it also consumes the party's random stream.

Both are deterministic: what a party sends and when depends only on the messages it has processed, never on timing,
so a run over TLS equals the same run in one process, and ``tests/test_pipeline_oracle.py`` checks both against a
reference written directly in PyTorch. At an epoch's end the in-flight steps drain before validation, so epoch
checkpoints hold no in-flight state. Only parties whose program is forward-send-await-backward (no incoming cut)
can run ahead; U-shaped (the client also waits for the middle's output) is refused with an error saying so.

Example:
    >>> from vsplit.topology import Topology
    >>> runs_ahead(Topology.vertical(label_party="bank", feature_parties=["shop"], width=4), "shop")
    True
    >>> runs_ahead(Topology.u_shaped(client="bank", server="cloud", widths=(4, 4)), "cloud")
    False
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from vsplit.errors import ProtocolError
from vsplit.models.optim import clear_grads
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.topology.graph import Topology
from vsplit.topology.program import AWAIT_ACT, LOSS, SEND_ACT, compile_program


def runs_ahead(topology: Topology, party: str) -> bool:
    """Whether ``party`` can have several training steps in flight: it only sends activations and awaits gradients."""
    kinds = {op.kind for op in compile_program(topology, party, phase="train")}
    return AWAIT_ACT not in kinds and LOSS not in kinds and SEND_ACT in kinds


def check_ahead(topology: Topology, plan: Any) -> None:
    """Refuse a plan that runs ahead in a topology where some party other than the coordinator cannot."""
    if plan.ahead == 1 or plan.predict:
        return
    cannot = [p for p in topology.parties if p != topology.label_owner and not runs_ahead(topology, p)]
    if cannot:
        raise ProtocolError(
            f"pipeline_window / local_steps > 1 needs every party but {topology.label_owner!r} to only send "
            f"activations and await their gradients (vertical, vanilla); in {topology.kind} {cannot} also await "
            "activations. Set pipeline_window = 1 and local_steps = 1 for this topology",
            local=True, code=AbortCode.CONFIG_MISMATCH,
        )


@dataclass
class _Unit:
    """One training step in flight: its batch, its autograd context and (pipelining) its parameter stash."""

    step: int
    rows: Any
    idx: torch.Tensor
    ctx: dict = field(default_factory=dict)
    stash: dict[str, dict[str, torch.Tensor]] | None = None
    position: int = 0  # index in its group of local steps
    pc: int = 0  # the next op of its back half


class AheadMixin:
    """The ahead-running part of :class:`~vsplit.protocol.training.machine.SplitMachine` (see the module docstring).

    The machine calls :meth:`_setup_ahead` when it learns the plan, and :meth:`_ahead_loop` instead of its step
    loop while training with ``plan.ahead > 1``.
    """

    _ahead: int = 1
    _pipelined: bool = False

    def _setup_ahead(self, plan: Any) -> None:
        self._ahead = 1 if plan.predict else plan.ahead
        self._pipelined = self._ahead > 1 and not self.is_coordinator
        if self._ahead > 1:
            check_ahead(self.topology, plan)
        if not self._pipelined:
            return
        if self.embedding_hooks or self.local_loss is not None:
            raise ProtocolError(
                f"{self.name}: defenses on the activations it sends (embedding noise, NoPeek) are not supported with "
                "pipeline_window / local_steps > 1 yet; set both to 1 or drop the defense", local=True,
                code=AbortCode.CONFIG_MISMATCH)
        split = next(i for i, (fn, _) in enumerate(self._train_ops) if fn == self._await_gradients)
        self._front_ops, self._back_ops = self._train_ops[:split], self._train_ops[split:]
        self._flight: deque[_Unit] = deque()
        self._front = 0
        self._local = plan.local_steps > 1

    def _enter_ahead(self) -> None:
        self._flight = deque()
        self._front = 0

    def _ahead_base(self) -> int:
        """The oldest training step whose gradients may still come (what the inbox admits from)."""
        return self._flight[0].step if self._pipelined and self._flight else self.step

    def _ahead_loop(self) -> list[Outgoing]:
        out: list[Outgoing] = []
        n = len(self._batches)
        while not self._waiting and not self.done:
            room = (not self._flight) if self._local else len(self._flight) < self._ahead
            if room and self._front < n:
                for position in range(self._ahead if self._local else 1):
                    if self._front >= n:
                        break
                    self._send_unit(self._front, position, out)
                    self._front += 1
                continue
            if not self._flight:  # drained: validation runs the exact loop
                out += self._end_phase()
                return out + self._loop()
            if not self._retire(self._flight[0], out):
                return out

    def _switch(self, unit: _Unit) -> None:
        self.step, self._rows, self._idx, self._ctx = unit.step, unit.rows, unit.idx, unit.ctx

    def _send_unit(self, step: int, position: int, out: list[Outgoing]) -> None:
        unit = _Unit(step=step, rows=self._batches[step], idx=self._index[step], position=position)
        self._switch(unit)
        if not self._local:
            unit.stash = {k: {n: p.detach().clone().requires_grad_(p.requires_grad)
                              for n, p in m.named_parameters()} for k, m in self.modules.items()}
        grad = not self._local or position == 0  # in a group only the first step's graph is used
        with torch.set_grad_enabled(grad):
            for fn, arg in self._front_ops:
                if fn == self._forward:
                    self._forward_unit(arg, unit)
                else:
                    fn(arg, out)
        self._flight.append(unit)

    def _forward_unit(self, arg: tuple, unit: _Unit) -> None:
        if unit.stash is None:
            self._call(arg)
            return
        name, module, inputs, _ = arg
        if inputs:  # runs_ahead() admits only source segments; a party's later segments read them locally
            self._call(arg)
            return
        self._ctx[name] = torch.func.functional_call(module, unit.stash[name],
                                                     tuple(t[self._idx] for t in self.data[name]))

    def _retire(self, unit: _Unit, out: list[Outgoing]) -> bool:
        """Run the back half of the oldest unit as far as its gradients allow; True once it has stepped."""
        self._switch(unit)
        ops = self._back_ops
        while unit.pc < len(ops):
            fn, arg = ops[unit.pc]
            if fn == self._await_gradients:
                if not fn(arg, out):
                    return False
                unit.pc += 1
                continue
            if fn == self._backward and unit.pc == self._first_backward():
                if optimizer := self.optimizer:
                    clear_grads(optimizer)
                if self._local and unit.position > 0:
                    self._refresh(unit)
            fn(arg, out)
            if fn == self._backward and unit.stash is not None:
                self._unstash(unit)
            unit.pc += 1
        self._flight.popleft()
        return True

    def _first_backward(self) -> int:
        return next(i for i, (fn, _) in enumerate(self._back_ops) if fn == self._backward)

    def _refresh(self, unit: _Unit) -> None:
        """Local steps: recompute the unit's activations with the current weights (the gradients stay cached)."""
        fresh: dict = {}
        self._ctx = fresh
        for fn, arg in self._front_ops:
            if fn == self._forward:
                self._call(arg)
        for key, value in unit.ctx.items():
            if type(key) is tuple and key[0] == "sent":
                cut = self._cuts[key[1]]
                value = fresh[cut.src]
                unit.ctx[key] = value if type(value) is tuple else (value,)
        self._ctx = unit.ctx

    def _unstash(self, unit: _Unit) -> None:
        """Pipelining: the gradient at the stashed weights becomes the gradient of the live weights."""
        assert unit.stash is not None
        for key, module in self.modules.items():
            stash = unit.stash[key]
            for name, p in module.named_parameters():
                p.grad = stash[name].grad
        unit.stash = None

