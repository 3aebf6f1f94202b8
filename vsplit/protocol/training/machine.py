"""One sans-IO machine for every party of every topology: training, validation and joint prediction.

Theory of operation. The machine interprets its party's step program (:mod:`vsplit.topology.program`): per
training step it runs the ops of the ``train`` program in order, and per validation or scoring chunk those of the
``eval`` program. An op that needs a peer's tensor (``AwaitActivations``, ``AwaitGradients``) blocks until it is in
the inbox; every other op runs at once. Activations that arrive become autograd leaves; each component's backward
is one ``torch.autograd.backward`` call over its roots (the loss, the tensors it sent with the gradients that came
back, a local penalty), and the optimizer steps when the step's program ends.

The loss segment's owner is the *coordinator*: every other party first sends it :class:`Ready` (its resume epoch
and topology fingerprint); it answers with the plan (training, or scoring), scores the validation rows after each
epoch and tells everyone whether to keep the epoch's weights and whether to stop (:class:`EpochEnd`).

The inbox is keyed by (cut, slot, phase, epoch, step) and bounded per peer by what an honest peer can have
outstanding (one step per cut in training, the validation or scoring chunks in evaluation): a peer that sends ahead
of the protocol, twice, or for a cut it does not own is refused with a :class:`ProtocolError`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from vsplit.errors import DivergenceError, ProtocolError
from vsplit.models.averaging import ParameterAverage, check_ema
from vsplit.models.determinism import any_random
from vsplit.models.optim import clear_grads
from vsplit.models.recipe import resolve_monitor
from vsplit.models.rng import PartyRng
from vsplit.models.schedule import check_lr_schedule, lr_factor, scale_lr
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, all_finite, all_within
from vsplit.protocol.training.compression import Compressor, shape_of, values_of
from vsplit.protocol.training.hooks import EmbeddingHook, GradientHook, LocalLoss, Observer, StepInfo
from vsplit.protocol.training.messages import (
    EVAL,
    PREDICT,
    TRAIN,
    Activations,
    EpochEnd,
    Gradients,
    PackedActivations,
    PackedGradients,
    Ready,
    SparseGradients,
    TrainingPlan,
)
from vsplit.protocol.training.pipeline import AheadMixin
from vsplit.protocol.training.plan import Plan
from vsplit.topology.graph import Topology
from vsplit.topology.program import (
    AWAIT_ACT,
    AWAIT_GRAD,
    BACKWARD,
    COLLECT,
    FORWARD,
    LOCAL_BACKWARD,
    LOSS,
    SEND_ACT,
    SEND_GRAD,
    STEP,
    compile_program,
)


def _leaf(t: torch.Tensor) -> torch.Tensor:
    """``t`` cut from its graph, as a leaf that collects its own gradient (when ``t`` needs one)."""
    return t.detach().requires_grad_() if t.requires_grad else t


def _peak(t: torch.Tensor) -> float:
    """The largest magnitude in ``t`` (infinite if it holds a NaN)."""
    values = t.detach()
    if not values.numel():
        return 0.0
    return float("inf") if bool(torch.isnan(values).any()) else float(values.abs().max())


class TrainingCallback(Protocol):
    """Progress reporting at the coordinator: both methods are optional."""

    def on_step(self, epoch: int, step: int, steps: int, loss: float) -> None: ...

    def on_epoch(self, record: dict[str, Any]) -> None: ...


@dataclass
class TrainingResult:
    """What the coordinator learns from training: per-epoch history and the epoch whose weights were kept."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int | None = None
    best_score: float | None = None
    stopped_early: bool = False


def _default_task() -> Any:
    from vsplit.models.tasks import make_task

    return make_task("binary")


class SplitMachine(AheadMixin):
    """Runs one party's part of a topology.

    Args:
        name: this party's name (an owner in ``topology``).
        topology: the split every party agreed on.
        modules: this party's segments: segment name -> module.
        optimizer: over the parameters of ``modules`` (``None`` when only scoring).
        rng: this party's random stream (dropout).
        data: this party's rows per source segment, in the aligned order: segment name -> tensors
            (the segment is called as ``module(*tensors)``).
        labels: the labels in the aligned order (the coordinator, when training).
        task: loss, predictions and metrics (see :mod:`vsplit.models.tasks`); default binary.
        plan: the schedule (the coordinator only; the others receive it). ``Plan.scoring(n)`` scores.
        patience: epochs without validation improvement before stopping (``None``: never stop early).
        monitor: what "improvement" means, and which epoch's weights are kept (the coordinator): ``"val_loss"``
            (default: the lowest validation loss), ``"val_<metric>"``, the task's primary metric (``"val_auc"``
            for a binary task; the best value, falling back to the loss where the metric is undefined), or ``"auto"``
            (:func:`vsplit.models.recipe.resolve_monitor`: val_auc for a binary task, else val_loss).
        callbacks: progress reporting (coordinator).
        gradient_hooks: transform each gradient this party sends (``info.party`` is the receiver).
        embedding_hooks: transform each activation this party sends (in the autograd graph when training).
        observers: see each gradient this party receives.
        local_loss: an extra loss on the activations a source segment of this party sends.
        resume_epoch / restore / on_epoch_end: checkpointing, as in :meth:`state`.
        compression / error_feedback: the codec of the tensors this party sends (see
            :mod:`~vsplit.protocol.training.compression`); it receives every codec.
        keep_best: snapshot the weights of the best epoch and load them at the end (``False``: keep the last
            weights, and never write to the modules outside a step: machines sharing one module, as a SplitFed hub's
            do, rely on it).
        max_abs_activation / max_abs_gradient: refuse a received tensor with a value beyond this magnitude, as a
            non-finite one is (``train.max_abs_activation``, ``train.max_abs_gradient``; ``None``: any finite value).
        bag: ``(network, networks)``: the network of a bag (``train.networks``) this machine runs; the coordinator
            refuses a party whose Ready names another (:class:`~vsplit.protocol.training.messages.Ready`).
        lr_schedule: how this party's optimizer's learning rate changes over the plan's epochs
            (:mod:`vsplit.models.schedule`: ``"constant"`` or ``"cosine"``); set at the start of each epoch from the
            epoch and the plan, which every party has, so the parties need not exchange anything for it.
        ema: the decay per optimizer step of a moving average of this party's own parameters
            (:mod:`vsplit.models.averaging`; 0, the default: none). With one, validation scores the averaged
            weights and the kept epoch's weights are its average; it needs ``keep_best``.

    Divergence is an error: a training or validation loss that is not finite stops the coordinator with a
    :class:`~vsplit.errors.DivergenceError` naming the party whose input of that step was largest (the peers are told
    ``AbortCode.DIVERGED``), before any gradient of it is sent or the epoch is kept.
    """

    def __init__(
        self,
        *,
        name: str,
        topology: Topology,
        modules: Mapping[str, nn.Module],
        optimizer: torch.optim.Optimizer | None,
        rng: PartyRng,
        data: Mapping[str, Sequence[torch.Tensor]] | None = None,
        labels: torch.Tensor | None = None,
        task: Any = None,
        plan: Plan | None = None,
        patience: int | None = 3,
        monitor: str = "val_loss",
        callbacks: Sequence[TrainingCallback] = (),
        gradient_hooks: Sequence[GradientHook] = (),
        embedding_hooks: Sequence[EmbeddingHook] = (),
        observers: Sequence[Observer] = (),
        local_loss: LocalLoss | None = None,
        resume_epoch: int = -1,
        restore: Callable[[int], dict[str, Any]] | None = None,
        on_epoch_end: Callable[[dict[str, Any]], None] | None = None,
        compression: str = "none",
        error_feedback: bool = False,
        keep_best: bool = True,
        max_abs_activation: float | None = None,
        max_abs_gradient: float | None = None,
        bag: tuple[int, int] = (0, 1),
        lr_schedule: str = "constant",
        ema: float = 0.0,
    ) -> None:
        self.name = name
        #: (network, networks): which network of a bag this machine runs; every party's Ready must say the same
        self.bag = (int(bag[0]), int(bag[1]))
        self.topology = topology
        self.coordinator = topology.label_owner
        self.is_coordinator = name == self.coordinator
        own = topology.segments_of(name)
        if not own:
            raise ProtocolError(f"{name}: owns no segment of the topology {topology.kind}", local=True)
        missing = sorted({s.name for s in own} - set(modules))
        if missing:
            raise ProtocolError(f"{name}: no module given for its segments {missing}", local=True)
        data = dict(data or {})
        no_rows = sorted(s.name for s in topology.sources_of(name) if s.name not in data)
        if no_rows:
            raise ProtocolError(f"{name}: no rows given for its source segments {no_rows}", local=True)
        if self.is_coordinator and plan is None:
            raise ProtocolError(f"{name}: the coordinator needs a plan", local=True)
        self.modules = {s.name: modules[s.name] for s in own}
        self.optimizer = optimizer
        problem = check_lr_schedule(lr_schedule)
        if problem:
            raise ProtocolError(f"{name}: {problem}", local=True)
        self.lr_schedule = lr_schedule
        if problem := check_ema(ema):
            raise ProtocolError(f"{name}: {problem}", local=True)
        if ema and not keep_best:
            raise ProtocolError(f"{name}: a moving average of the parameters swaps them outside a step, which "
                                "keep_best=False forbids (modules shared between machines); set ema to 0", local=True)
        self._average = ParameterAverage([p for g in optimizer.param_groups for p in g["params"]], decay=ema) if (
            ema and optimizer is not None) else None
        self.rng = rng
        self.data = {k: tuple(v) for k, v in data.items()}
        self.labels = labels
        self.task = task if task is not None else _default_task()
        self.plan = plan
        self.patience = patience
        monitor = resolve_monitor(monitor, self.task.name)
        if self.is_coordinator and monitor not in ("val_loss", f"val_{self.task.primary}"):
            raise ProtocolError(f"{name}: monitor {monitor!r}: use 'val_loss', 'val_{self.task.primary}' (the "
                                f"{self.task.name} task's metric) or 'auto'", local=True)
        self.monitor = monitor
        self.callbacks = list(callbacks)
        self.gradient_hooks = list(gradient_hooks)
        self.embedding_hooks = list(embedding_hooks)
        self.observers = list(observers)
        self.local_loss = local_loss
        self.resume_epoch = resume_epoch
        self.restore = restore
        self.on_epoch_end = on_epoch_end
        self.compressor = Compressor(compression, error_feedback=error_feedback)
        self.keep_best = keep_best
        self.max_abs_activation, self.max_abs_gradient = max_abs_activation, max_abs_gradient
        self.fingerprint = topology.view_fingerprint(name)
        # this party's random stream is swapped in around its work only where something can draw from it
        self._random = bool(self.embedding_hooks or self.gradient_hooks or self.local_loss or self.observers) or (
            any_random(self.modules.values()))
        self.result: Any = None
        self.done = False
        self.epoch = 0
        self.step = 0
        self.epochs_run = 0
        self.training = TrainingResult()
        self._peers = topology.peers_of(name)
        self._cuts = {c.id: c for c in topology.cuts}
        self._segments = {s.name: s for s in topology.segments}
        self._train_ops = self._bind(compile_program(topology, name, phase="train"))
        self._eval_ops = self._bind(compile_program(topology, name, phase="eval"))
        self._slots_from = {p: 0 for p in self._peers}
        for c in topology.cuts_into(name):
            self._slots_from[c.src_owner] += len(c.shapes)
        for c in topology.cuts_out_of(name):  # gradients come back from each cut's reader
            self._slots_from[c.dst] += len(c.shapes)
        self._inbox: dict[tuple, np.ndarray] = {}
        self._next: dict[tuple, tuple[int, int]] = {}
        self._held = dict.fromkeys(self._peers, 0)
        self._remaining: dict[str, int] = {}
        self._ready: dict[str, int] = {}
        self._phase = -1  # TRAIN, EVAL, PREDICT once running; -1 before the plan
        self._waiting = "ready" if self.is_coordinator else "plan"
        self._ops: list = []
        self._pc = 0
        self._ctx: dict[object, Any] = {}
        self._batches: list[np.ndarray] = []
        self._index: list[torch.Tensor] = []
        self._chunks: list[np.ndarray] = []
        self._chunk_index: list[torch.Tensor] = []
        self._collected: list[torch.Tensor] = []
        self._losses: list[float] = []
        self._best: dict[str, Any] | None = None
        self._since_best = 0
        self._limit = 1

    # -- the machine interface ---------------------------------------------------------------------------------------
    def start(self) -> list[Outgoing]:
        if not self.is_coordinator:
            network, networks = self.bag
            return [Outgoing(self.coordinator, Ready(resume_epoch=self.resume_epoch, topology=self.fingerprint,
                                                     network=network, networks=networks))]
        return self._begin() if not self._peers else []

    def expects(self, peer: str) -> bool:
        """Whether this machine may still need a message from ``peer``: a peer that has sent everything it owes and
        closes its channel is then no error (in scoring, a partner finishes before the others)."""
        if self.done or peer not in self._peers:  # a party outside this topology owes it nothing
            return False
        if self._phase == PREDICT:
            return self._remaining.get(peer, 0) > 0
        return True

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        kind = type(msg)
        if kind is Activations or kind is PackedActivations:
            self._store_activations(sender, msg)  # type: ignore[arg-type]
            return self._run()
        if kind is Gradients or kind is PackedGradients or kind is SparseGradients:
            self._store_gradients(sender, msg)  # type: ignore[arg-type]
            return self._run()
        if sender not in self._held:
            raise ProtocolError(f"{self.name}: message from {sender!r}, which is not a peer in this topology")
        if kind is Ready and self._waiting == "ready" and sender not in self._ready:
            self._check_topology(sender, msg)  # type: ignore[arg-type]
            self._ready[sender] = msg.resume_epoch  # type: ignore[attr-defined]
            return self._begin() if len(self._ready) == len(self._peers) else []
        if kind is TrainingPlan and self._waiting == "plan" and sender == self.coordinator:
            return self._on_plan(msg)  # type: ignore[arg-type]
        if kind is EpochEnd and self._waiting == "epoch_end" and sender == self.coordinator:
            return self._on_epoch_end(msg)  # type: ignore[arg-type]
        raise ProtocolError(f"{self.name}: {kind.__name__} from {sender!r} not expected now")

    # -- handshake ---------------------------------------------------------------------------------------------------
    def _check_topology(self, sender: str, msg: Ready) -> None:
        expected = self.topology.view_fingerprint(sender)
        if msg.topology != expected:
            raise ProtocolError(
                f"{self.name}: {sender!r} is configured with another topology (its view {msg.topology}, this "
                f"party's view of it {expected}); give every party the same [topology] and model widths",
                code=AbortCode.CONFIG_MISMATCH,
            )
        if (msg.network, msg.networks) != self.bag:
            raise ProtocolError(
                f"{self.name}: {sender!r} runs network {msg.network + 1} of a bag of {msg.networks} (its "
                f"train.networks = {msg.networks}), this party network {self.bag[0] + 1} of {self.bag[1]} (train."
                f"networks = {self.bag[1]}); give every party the same train.networks",
                code=AbortCode.CONFIG_MISMATCH,
            )

    def _begin(self) -> list[Outgoing]:
        """Coordinator: everyone is ready; pick the epoch to start from, send the plan, and run."""
        assert self.plan is not None
        self._waiting = ""
        out: list[Outgoing] = []
        if not self.plan.predict:
            last_common = min([self.resume_epoch, *self._ready.values()])
            if last_common >= 0:
                if self.restore is None:
                    raise ProtocolError(f"{self.name}: resuming needs a restore function", local=True)
                self.load_state(self.restore(last_common))
            self.plan = dataclasses.replace(self.plan, start_epoch=min(last_common + 1, self.plan.epochs))
        if self._peers:
            plan_msg = self.plan.to_message()
            out = [Outgoing(p, plan_msg) for p in self._peers]
        return out + self._start_plan()

    def _on_plan(self, msg: TrainingPlan) -> list[Outgoing]:
        plan = Plan.from_message(msg)
        for seg, tensors in self.data.items():
            if len(tensors[0]) != plan.n_rows:
                raise ProtocolError(
                    f"{self.name}: the plan covers {plan.n_rows} aligned rows, segment {seg!r} has {len(tensors[0])}",
                    code=AbortCode.CONFIG_MISMATCH,
                )
        if not plan.predict and plan.start_epoch > 0:
            if self.restore is None or plan.start_epoch - 1 > self.resume_epoch:
                raise ProtocolError(
                    f"{self.name}: asked to resume after epoch {plan.start_epoch - 1}, which this party has no "
                    "checkpoint of",
                    code=AbortCode.CONFIG_MISMATCH,
                )
            self.load_state(self.restore(plan.start_epoch - 1))
        self.plan = plan
        self._waiting = ""
        return self._start_plan()

    def _start_plan(self) -> list[Outgoing]:
        assert self.plan is not None
        plan = self.plan
        for seg, tensors in self.data.items():
            if len(tensors[0]) != plan.n_rows:
                raise ProtocolError(f"{self.name}: segment {seg!r} has {len(tensors[0])} rows, the plan {plan.n_rows}",
                                    local=True)
        if self.is_coordinator and not plan.predict and (self.labels is None or len(self.labels) != plan.n_rows):
            n = None if self.labels is None else len(self.labels)
            raise ProtocolError(f"{self.name}: {n} labels for {plan.n_rows} aligned rows", local=True)
        self._chunks = plan.eval_chunks()
        self._chunk_index = [torch.from_numpy(rows) for rows in self._chunks]
        self._setup_ahead(plan)
        self._limit = max(1, len(self._chunks), self._ahead)
        if plan.predict:
            self._set_train(False)
            self._remaining = {p: n * len(self._chunks) for p, n in self._slots_from.items()}
            return self._enter_eval(PREDICT) + self._run()
        self.epoch = plan.start_epoch
        if self.epoch >= plan.epochs or self.training.stopped_early:
            self._finish()
            return []
        return self._enter_train() + self._run()

    # -- phases ------------------------------------------------------------------------------------------------------
    def _enter_train(self) -> list[Outgoing]:
        assert self.plan is not None
        self._batches = self.plan.batches(self.epoch)
        self._index = [torch.from_numpy(rows) for rows in self._batches]  # torch indexes faster with its own tensors
        self._losses = []
        if self._average is not None:
            self._average.swap_out()
        if self.optimizer is not None and self.lr_schedule != "constant":
            scale_lr(self.optimizer, lr_factor(self.lr_schedule, self.epoch, self.plan.epochs))
        self._set_train(True)
        self._phase, self._ops, self.step, self._pc = TRAIN, self._train_ops, 0, 0
        self._new_unit()
        if self._pipelined:
            self._enter_ahead()
        return []

    def _enter_eval(self, phase: int) -> list[Outgoing]:
        if self._average is not None and phase == EVAL:
            self._average.swap_in()
        self._set_train(False)
        self._collected = []
        self._phase, self._ops, self.step, self._pc = phase, self._eval_ops, 0, 0
        if not self._chunks:
            return self._end_phase()
        self._new_unit()
        return []

    def _new_unit(self) -> None:
        self._ctx = {}
        if self._phase == TRAIN:
            self._rows = self._batches[self.step]
            self._idx = self._index[self.step]
        else:
            self._rows = self._chunks[self.step]
            self._idx = self._chunk_index[self.step]
        if self._phase == TRAIN and self.optimizer is not None:
            clear_grads(self.optimizer)

    def _run(self) -> list[Outgoing]:
        if not self._random:
            return self._loop()
        with self.rng:
            return self._loop()

    def _loop(self) -> list[Outgoing]:
        if self._pipelined and self._phase == TRAIN:
            return self._ahead_loop()
        out: list[Outgoing] = []
        while not self._waiting and not self.done:
            ops = self._ops
            if self._pc == len(ops):
                out += self._end_unit()
                continue
            fn, arg = ops[self._pc]
            if not fn(arg, out):
                break
            self._pc += 1
        return out

    def _end_unit(self) -> list[Outgoing]:
        self.step += 1
        self._pc = 0
        limit = len(self._batches) if self._phase == TRAIN else len(self._chunks)
        if self.step < limit:
            self._new_unit()
            return []
        return self._end_phase()

    def _end_phase(self) -> list[Outgoing]:
        if self._phase == TRAIN:
            self._set_train(True)
            return self._enter_eval(EVAL)
        if self._phase == PREDICT:
            if self.is_coordinator:
                self.result = self._predictions()
            self._phase = -1
            self._set_train(False)
            self.done = True
            return []
        if self.is_coordinator:
            return self._coordinate_epoch_end()
        self._waiting = "epoch_end"
        return []

    # -- epoch ends --------------------------------------------------------------------------------------------------
    def _coordinate_epoch_end(self) -> list[Outgoing]:
        assert self.plan is not None and self.labels is not None
        record: dict[str, Any] = {"epoch": self.epoch, "train_loss": float(np.mean(self._losses))}
        improved = True
        if self._chunks:
            outputs = torch.cat(self._collected)
            y = self.labels[torch.from_numpy(np.concatenate(self._chunks))]
            val_loss = float(self.task.loss(outputs, y))
            if not math.isfinite(val_loss):
                raise self._diverged("validation loss", val_loss)
            record["val_loss"] = val_loss
            targets, predictions = y.numpy(), self.task.predict(outputs)
            # the primary metric under its own name, null where undefined (AUC of one class); never a stand-in
            metric = float(self.task.metrics(targets, predictions)[self.task.primary])
            record[f"val_{self.task.primary}"] = None if math.isnan(metric) else metric
            value = float(self.task.score(targets, predictions))  # early stopping's score (its own fallbacks)
            score = -val_loss if self.monitor == "val_loss" or math.isnan(value) else value
            improved = self.training.best_score is None or score > self.training.best_score
            if improved:
                self.training.best_score = score
        self._collected = []
        stop = self._epoch_done(improved)
        self.training.history.append(record)
        for callback in self.callbacks:
            if hasattr(callback, "on_epoch"):
                callback.on_epoch(record)
        last = stop or self.epoch + 1 >= self.plan.epochs
        if last:
            self.training.stopped_early = stop and self.epoch + 1 < self.plan.epochs
        out = [Outgoing(p, EpochEnd(epoch=self.epoch, improved=improved, stop=last)) for p in self._peers]
        return out + self._after_epoch(last)

    def _epoch_done(self, improved: bool) -> bool:
        """Keep the weights of an improved epoch; True if patience has run out."""
        self.epochs_run += 1
        if improved:
            if self.is_coordinator:
                self.training.best_epoch = self.epoch
            if self.keep_best:
                self._best = self._snapshot()
            self._since_best = 0
        else:
            self._since_best += 1
        return self.patience is not None and self._since_best > self.patience

    def _on_epoch_end(self, msg: EpochEnd) -> list[Outgoing]:
        assert self.plan is not None
        if msg.epoch != self.epoch:
            raise ProtocolError(f"{self.name}: epoch end for {msg.epoch}, expected {self.epoch}")
        self._epoch_done(msg.improved)
        self._waiting = ""
        return self._after_epoch(msg.stop or self.epoch + 1 >= self.plan.epochs) + self._run()

    def _after_epoch(self, last: bool) -> list[Outgoing]:
        if self.on_epoch_end is not None:
            self.on_epoch_end(self.state())
        if last:
            self._finish()
            return []
        self.epoch += 1
        return self._enter_train()

    def _finish(self) -> None:
        if self._best is not None:
            for key, module in self.modules.items():
                module.load_state_dict(self._best[key])
        self._set_train(False)
        self._phase = -1
        self.done = True
        self.result = self.training if self.is_coordinator else {"epochs_run": self.epochs_run}

    def _predictions(self) -> np.ndarray:
        if not self._collected:
            return np.zeros(0)
        return np.asarray(self.task.predict(torch.cat(self._collected)), dtype=np.float64)

    # -- the inbox ---------------------------------------------------------------------------------------------------
    def _admit(self, sender: str, key: tuple, epoch: int, step: int, *, training: bool) -> None:
        """Refuse a tensor that an honest peer cannot send now: for another epoch, out of order on its cut (a
        duplicate, or a step skipped), ahead of what may be outstanding, or past the peer's bound."""
        if epoch != self.epoch and self._phase != PREDICT:
            raise ProtocolError(f"{self.name}: {sender!r} sent a tensor for epoch {epoch}, this is epoch {self.epoch}")
        stream = key[:4]  # (kind, cut, slot, phase): one ordered stream per peer channel
        last_epoch, expected = self._next.get(stream, (epoch, 0))
        if last_epoch != epoch:
            expected = 0
        if training:
            base = self._ahead_base()
            ahead = self._phase != TRAIN or not base <= step < base + self._ahead
        else:
            ahead = step >= len(self._chunks) if self._phase >= EVAL else step >= self._limit
        if step != expected or ahead or self._held[sender] >= self._slots_from[sender] * self._limit:
            raise ProtocolError(
                f"{self.name}: {sender!r} sent a tensor out of order or ahead of the protocol (epoch {epoch}, step "
                f"{step}, expected step {expected}); refused",
                code=AbortCode.PROTOCOL_VIOLATION,
            )
        self._next[stream] = (epoch, step + 1)

    def _store_activations(self, sender: str, msg: Activations | PackedActivations) -> None:
        cut = self._cuts.get(msg.cut)
        if cut is None or cut.dst != self.name or cut.src_owner != sender or msg.slot >= len(cut.shapes):
            raise ProtocolError(f"{self.name}: {sender!r} sent activations for cut {msg.cut}/{msg.slot}, not its own")
        key = (0, msg.cut, msg.slot, msg.phase, msg.step)
        self._admit(sender, key, msg.epoch, msg.step, training=msg.phase == TRAIN)
        if shape_of(msg)[1:] != cut.shapes[msg.slot]:
            raise ProtocolError(
                f"{self.name}: {sender!r} sent activations of shape {shape_of(msg)[1:]} on cut c{cut.id}, "
                f"expected {cut.shapes[msg.slot]}"
            )
        self._inbox[key] = values_of(msg)
        self._held[sender] += 1
        if self._phase == PREDICT:  # owed until received, not until used: a peer that sent all may close
            self._remaining[sender] -= 1

    def _store_gradients(self, sender: str, msg: Gradients | PackedGradients | SparseGradients) -> None:
        cut = self._cuts.get(msg.cut)
        if cut is None or cut.src_owner != self.name or cut.dst != sender or msg.slot >= len(cut.shapes):
            raise ProtocolError(f"{self.name}: {sender!r} sent gradients for cut {msg.cut}/{msg.slot}, not its own")
        key = (1, msg.cut, msg.slot, TRAIN, msg.step)
        self._admit(sender, key, msg.epoch, msg.step, training=True)
        expected = (len(self._batches[msg.step]), *cut.shapes[msg.slot])
        if shape_of(msg) != expected:  # checked before decoding, which allocates the declared shape
            raise ProtocolError(f"{self.name}: {sender!r} sent gradients of shape {shape_of(msg)} on cut c{cut.id}, "
                                f"expected {expected}")
        self._inbox[key] = values_of(msg)
        self._held[sender] += 1

    def _take(self, kind: int, cut_id: int, phase: int) -> list[np.ndarray] | None:
        cut = self._cuts[cut_id]
        keys = [(kind, cut_id, slot, phase, self.step) for slot in range(len(cut.shapes))]
        inbox = self._inbox
        for key in keys:
            if key not in inbox:
                return None
        peer = cut.src_owner if kind == 0 else cut.dst
        self._held[peer] -= len(keys)
        return [inbox.pop(key) for key in keys]

    # -- ops ---------------------------------------------------------------------------------------------------------
    def _bind(self, program: tuple) -> list:
        table = {
            AWAIT_ACT: self._await_activations, FORWARD: self._forward, SEND_ACT: self._send_activations,
            LOSS: self._loss, COLLECT: self._collect, AWAIT_GRAD: self._await_gradients, BACKWARD: self._backward,
            SEND_GRAD: self._send_gradients, LOCAL_BACKWARD: self._local_backward, STEP: self._step,
        }
        later = {name for op in program if op.kind == LOCAL_BACKWARD for name in op.arg}  # type: ignore[union-attr]
        bound = []
        for op in program:
            arg = op.arg
            if op.kind == FORWARD:
                seg = self._segments[arg]  # type: ignore[index]
                arg = (seg.name, self.modules[seg.name], seg.inputs, seg.name in later)
            elif op.kind == BACKWARD:
                members = set(arg)  # type: ignore[arg-type]
                loss = any(self._segments[n].loss for n in members)
                out_cuts = tuple(c.id for c in self.topology.cuts if c.src in members)
                arg = (loss, out_cuts)
            bound.append((table[op.kind], arg))
        return bound

    def _info(self, party: str, *, labels: torch.Tensor | None = None,
              activations: torch.Tensor | None = None) -> StepInfo:
        return StepInfo(party=party, epoch=self.epoch, step=self.step, rows=self._rows,
                        training=self._phase == TRAIN, labels=labels, activations=activations)

    def _forward(self, arg: tuple, out: list[Outgoing]) -> bool:
        if self._phase != TRAIN:
            with torch.no_grad():
                return self._call(arg)
        return self._call(arg)

    def _call(self, arg: tuple) -> bool:
        name, module, inputs, later = arg
        ctx = self._ctx
        if not inputs:
            idx = self._idx
            value = module(*[t[idx] for t in self.data[name]])
        elif len(inputs) == 1:
            value = ctx[inputs[0]]
            value = module(*value) if type(value) is tuple else module(value)
        else:
            value = module({i: ctx[i] for i in inputs})
        if later and self._phase == TRAIN:  # backpropagated after the sends (BackwardLocal): its readers get a leaf
            ctx[("graph", name)] = value
            value = tuple(_leaf(t) for t in value) if type(value) is tuple else _leaf(value)
        ctx[name] = value
        return True

    def _send_activations(self, cut_id: int, out: list[Outgoing]) -> bool:
        cut = self._cuts[cut_id]
        value = self._ctx[cut.src]
        tensors = value if type(value) is tuple else (value,)
        if len(tensors) != len(cut.shapes):
            raise ProtocolError(f"{self.name}: segment {cut.src!r} gave {len(tensors)} tensors, the topology "
                                f"declares {len(cut.shapes)}", local=True)
        if self.embedding_hooks:
            info = self._info(self.name)
            hooked = []
            for t in tensors:
                with torch.set_grad_enabled(self._phase == TRAIN):
                    for hook in self.embedding_hooks:
                        t = hook(t, info)
                hooked.append(t)
            tensors = tuple(hooked)
        self._ctx[("sent", cut_id)] = tensors
        n = len(self._rows)
        for slot, t in enumerate(tensors):
            if t.shape[0] != n or tuple(t.shape[1:]) != cut.shapes[slot]:
                raise ProtocolError(
                    f"{self.name}: segment {cut.src!r} produced shape {tuple(t.shape)}, the topology declares "
                    f"({n}, {', '.join(map(str, cut.shapes[slot]))}); fix the segment or the topology's widths",
                    local=True,
                )
            values = t.detach().numpy()
            if values.dtype != np.float32 or not values.flags.c_contiguous:
                values = np.ascontiguousarray(values, dtype=np.float32)
            out.append(Outgoing(cut.dst, self.compressor.pack_activations(cut_id, slot, self._phase, self.epoch,
                                                                          self.step, values)))
        return True

    def _await_activations(self, cut_id: int, out: list[Outgoing]) -> bool:
        got = self._take(0, cut_id, self._phase)
        if got is None:
            return False
        cut = self._cuts[cut_id]
        n = len(self._rows)
        leaves = []
        for values in got:
            if values.shape[0] != n:
                raise ProtocolError(f"{self.name}: {cut.src_owner!r} sent {values.shape[0]} rows on cut c{cut_id}, "
                                    f"the batch has {n}")
            if not all_finite(values):
                raise ProtocolError(f"{self.name}: {cut.src_owner!r} sent non-finite activations")
            bound = self.max_abs_activation
            if bound is not None and not all_within(values, bound):
                raise ProtocolError(f"{self.name}: {cut.src_owner!r} sent activations up to "
                                    f"{float(np.abs(values).max()):.3g} in magnitude, over train.max_abs_activation "
                                    f"= {bound:g}; refused")
            leaf = torch.from_numpy(values)
            leaves.append(leaf.requires_grad_() if self._phase == TRAIN else leaf)
        self._ctx[("leaves", cut_id)] = leaves
        self._ctx[cut.src] = leaves[0] if len(leaves) == 1 else tuple(leaves)
        return True

    def _loss(self, segment: str, out: list[Outgoing]) -> bool:
        assert self.labels is not None
        labels = self.labels[self._idx]
        self._ctx["labels"] = labels
        loss = self._ctx["loss"] = self.task.loss(self._ctx[segment], labels)
        value = self._ctx["loss_value"] = float(loss.detach())
        if not math.isfinite(value):  # before any gradient of it leaves, or the step is taken
            raise self._diverged("training loss", value)
        return True

    def _diverged(self, what: str, value: float) -> DivergenceError:
        """The error of a non-finite loss, naming the party whose input to this step was largest in magnitude."""
        peaks: dict[str, float] = {}
        for cut in self.topology.cuts_into(self.name):
            for leaf in self._ctx.get(("leaves", cut.id), ()):
                peaks[cut.src_owner] = max(peaks.get(cut.src_owner, 0.0), _peak(leaf))
        for seg in self.data:
            out = self._ctx.get(seg)
            for t in out if type(out) is tuple else (out,):
                if isinstance(t, torch.Tensor):
                    peaks[self.name] = max(peaks.get(self.name, 0.0), _peak(t))
        where = f"epoch {self.epoch}" + (f", step {self.step}" if self._phase == TRAIN else "")
        text = f"{self.name}: the {what} is not finite ({value}) at {where}: training diverged"
        if peaks:
            culprit = max(peaks, key=lambda p: peaks[p])
            whose = "this party's own layers" if culprit == self.name else f"party {culprit!r}"
            text += (f"; the input out of range came from {whose} (values up to {peaks[culprit]:.3g} in magnitude; "
                     "every input: " + ", ".join(f"{p} {v:.3g}" for p, v in sorted(peaks.items())) + ")")
        return DivergenceError(text + ". Nothing of this epoch is kept; set train.max_abs_activation to refuse such "
                               "inputs at once, or lower train.lr", code=AbortCode.DIVERGED)

    def _collect(self, segment: str, out: list[Outgoing]) -> bool:
        self._collected.append(self._ctx[segment].detach())
        return True

    def _await_gradients(self, cut_id: int, out: list[Outgoing]) -> bool:
        got = self._take(1, cut_id, TRAIN)
        if got is None:
            return False
        cut = self._cuts[cut_id]
        sent = self._ctx[("sent", cut_id)]
        grads = []
        for t, values in zip(sent, got, strict=True):
            if values.shape != tuple(t.shape):
                raise ProtocolError(f"{self.name}: gradient shape {values.shape} != activations {tuple(t.shape)}")
            if not all_finite(values):
                raise ProtocolError(f"{self.name}: {cut.dst!r} sent non-finite gradients")
            bound = self.max_abs_gradient
            if bound is not None and not all_within(values, bound):
                raise ProtocolError(f"{self.name}: {cut.dst!r} sent gradients up to {float(np.abs(values).max()):.3g} "
                                    f"in magnitude, over train.max_abs_gradient = {bound:g}; refused")
            grad = torch.from_numpy(values)
            if self.observers:
                info = self._info(self.name)
                for observe in self.observers:
                    observe(grad, info)
            grads.append(grad)
        self._ctx[("grads", cut_id)] = grads
        return True

    def _backward(self, arg: tuple, out: list[Outgoing]) -> bool:
        has_loss, out_cuts = arg
        ctx = self._ctx
        roots: list[torch.Tensor] = []
        grads: list[torch.Tensor | None] = []
        if has_loss:
            roots.append(ctx["loss"])
            grads.append(None)
        for cut_id in out_cuts:
            for t, g in zip(ctx[("sent", cut_id)], ctx[("grads", cut_id)], strict=True):
                if t.requires_grad:
                    roots.append(t)
                    grads.append(g)
            if self.local_loss is not None:
                src = self._cuts[cut_id].src
                if src in self.data:
                    inputs = tuple(t[self._idx] for t in self.data[src])
                    extra = self.local_loss(inputs, ctx[("sent", cut_id)][0])
                    roots.append(extra)
                    grads.append(torch.ones_like(extra))
        if roots:
            torch.autograd.backward(roots, grads)  # draws no random numbers: no need to swap in self.rng
        return True

    def _local_backward(self, names: tuple[str, ...], out: list[Outgoing]) -> bool:
        """Backpropagate the segments whose outputs the rest of their component read as leaves (see :meth:`_call`)."""
        ctx = self._ctx
        roots: list[torch.Tensor] = []
        grads: list[torch.Tensor] = []
        for name in names:
            graph, leaf = ctx[("graph", name)], ctx[name]
            for g, t in zip(graph if type(graph) is tuple else (graph,), leaf if type(leaf) is tuple else (leaf,),
                            strict=True):
                if g.requires_grad and t.grad is not None:
                    roots.append(g)
                    grads.append(t.grad)
        if roots:
            torch.autograd.backward(roots, grads)
        return True

    def _send_gradients(self, cut_id: int, out: list[Outgoing]) -> bool:
        cut = self._cuts[cut_id]
        for slot, leaf in enumerate(self._ctx[("leaves", cut_id)]):
            grad = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
            if self.gradient_hooks:
                info = self._info(cut.src_owner, labels=self._ctx.get("labels"), activations=leaf.detach())
                for hook in self.gradient_hooks:
                    grad = hook(grad, info)
                values = np.ascontiguousarray(grad.detach().numpy(), dtype=np.float32)
            else:
                values = grad.numpy()  # autograd's own gradient: contiguous float32 already
            out.append(Outgoing(cut.src_owner, self.compressor.pack_gradients(cut_id, slot, self.epoch, self.step,
                                                                              values)))
        return True

    def _step(self, arg: object, out: list[Outgoing]) -> bool:
        if self.optimizer is not None:
            self.optimizer.step()
            if self._average is not None:
                self._average.update()
        loss = self._ctx.get("loss")
        if loss is not None:
            value = self._ctx.get("loss_value")
            value = float(loss.detach()) if value is None else value
            self._losses.append(value)
            for callback in self.callbacks:
                if hasattr(callback, "on_step"):
                    callback.on_step(self.epoch, self.step, len(self._batches), value)
        return True

    # -- checkpoints -------------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to continue after the current epoch."""
        return {
            "epoch": self.epoch,
            "epochs_run": self.epochs_run,
            "modules": {k: m.state_dict() for k, m in self.modules.items()},
            "optimizer": self.optimizer.state_dict() if self.optimizer is not None else {},
            "average": self._average.state_dict() if self._average is not None else None,
            "rng": self.rng.state,
            "best": self._best,
            "since_best": self._since_best,
            "history": self.training.history,
            "best_epoch": self.training.best_epoch,
            "best_score": self.training.best_score,
            "stopped_early": self.training.stopped_early,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state` saved after epoch ``state["epoch"]``."""
        for key, module in self.modules.items():
            module.load_state_dict(state["modules"][key])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self._average is not None:
            if state.get("average") is None:
                raise ProtocolError(f"{self.name}: the checkpoint has no moving average of the parameters (it was "
                                    "written with ema = 0); resume with the same ema, or train again", local=True)
            self._average.load_state_dict(state["average"])
        self.rng.state = state["rng"]
        self._best = state["best"]
        self._since_best = state["since_best"]
        self.epochs_run = state["epochs_run"]
        self.epoch = state["epoch"]
        self.training = TrainingResult(
            history=list(state["history"]),
            best_epoch=state["best_epoch"],
            best_score=state["best_score"],
            stopped_early=state["stopped_early"],
        )

    def _set_train(self, mode: bool) -> None:
        for module in self.modules.values():
            module.train(mode)

    def _snapshot(self) -> dict[str, Any]:
        return {k: copy.deepcopy(m.state_dict()) for k, m in self.modules.items()}
