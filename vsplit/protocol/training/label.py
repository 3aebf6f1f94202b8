"""The label party's side of split training.

Theory of operation. The label party holds the labels, the top model and possibly bottoms of its own ("local"
bottoms: run without a cut). It starts by sending each feature party the :class:`TrainingPlan`. For every batch it
waits until every feature party's embeddings for that batch are in, runs its local bottoms and the top model,
computes the loss, back-propagates, sends each party the gradient of that party's own embeddings (after any
gradient hooks, e.g. a defense) and steps its optimizer. After an epoch it scores the validation rows, decides about
early stopping and tells everyone with :class:`EpochEnd`.

With no feature parties at all the same machine trains a model alone: that is how the "label party only" and
"centralized" baselines are computed with the same code as split training.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from vsplit.errors import ProtocolError
from vsplit.metrics import roc_auc
from vsplit.models.optim import clear_grads
from vsplit.models.rng import PartyRng
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, all_finite
from vsplit.protocol.training.hooks import GradientHook, StepInfo
from vsplit.protocol.training.messages import EVAL, TRAIN, Embeddings, EpochEnd, Gradients, Ready
from vsplit.protocol.training.plan import Plan

Inputs = tuple[torch.Tensor, torch.Tensor]


class TrainingCallback(Protocol):
    """Progress reporting: both methods are optional."""

    def on_step(self, epoch: int, step: int, steps: int, loss: float) -> None: ...

    def on_epoch(self, record: dict[str, Any]) -> None: ...


@dataclass
class TrainingResult:
    """What the label party learns from training: per-epoch history and the epoch whose weights were kept."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int | None = None
    best_score: float | None = None
    stopped_early: bool = False


class LabelTrainer:
    """Trains the top model (and any local bottoms) and coordinates the feature parties.

    Args:
        name: this party's name.
        plan: the shared schedule and row roles.
        top: the top model; it sees embeddings keyed by party name.
        local: bottoms run here without a cut: ``{name: (model, (cat, num))}``, rows in the aligned order.
        remote: the feature parties and the width of the embedding each sends.
        labels: float tensor of 0/1 labels in the aligned order.
        optimizer: optimizer over the top model and the local bottoms.
        rng: this party's random stream.
        gradient_hooks: transforms applied to each party's gradient before it is sent.
        patience: epochs without validation improvement before stopping (``None``: never stop early).
        callbacks: progress reporting.
        resume_epoch: the last epoch this party has a checkpoint of (-1: none).
        restore: returns this party's saved state of a given epoch (see :meth:`state`), for resuming.
        on_epoch_end: receives :meth:`state` after every epoch, to write a checkpoint.

    Training starts once every feature party has said :class:`Ready`; it resumes after the last epoch that every
    party has a checkpoint of.
    """

    def __init__(
        self,
        *,
        name: str,
        plan: Plan,
        top: nn.Module,
        local: Mapping[str, tuple[nn.Module, Inputs]],
        remote: Mapping[str, int],
        labels: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        rng: PartyRng,
        gradient_hooks: Sequence[GradientHook] = (),
        patience: int | None = 3,
        callbacks: Sequence[TrainingCallback] = (),
        resume_epoch: int = -1,
        restore: Callable[[int], dict[str, Any]] | None = None,
        on_epoch_end: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if len(labels) != len(plan.roles):
            raise ProtocolError(f"{name}: {len(labels)} labels for {len(plan.roles)} aligned rows", local=True)
        self.name = name
        self.plan = plan
        self.top = top
        self.local = dict(local)
        self.remote = dict(remote)
        self.labels = labels
        self.optimizer = optimizer
        self.rng = rng
        self.gradient_hooks = list(gradient_hooks)
        self.patience = patience
        self.callbacks = list(callbacks)
        self.result = TrainingResult()
        self.done = False
        self.epoch = 0
        self.step = 0
        self.resume_epoch = resume_epoch
        self.restore = restore
        self.on_epoch_end = on_epoch_end
        self._batches: list[np.ndarray] = []
        self._index: list[torch.Tensor] = []
        self._chunks = plan.eval_chunks()
        self._inbox: dict[str, deque[Embeddings]] = {p: deque() for p in self.remote}
        self._ready: dict[str, int] = {}
        self._started = False
        self._losses: list[float] = []
        self._best_state: dict[str, Any] | None = None
        self._since_best = 0

    # -- machine interface -----------------------------------------------------------------------------------------
    def start(self) -> list[Outgoing]:
        return self._begin() if not self.remote else []

    def _begin(self) -> list[Outgoing]:
        """Everyone is ready: pick the epoch to start from, tell the plan, and train."""
        self._started = True
        last_common = min([self.resume_epoch, *self._ready.values()])
        if last_common >= 0:
            if self.restore is None:
                raise ProtocolError(f"{self.name}: resuming needs a restore function", local=True)
            self.load_state(self.restore(last_common))
        self.plan = dataclasses.replace(self.plan, start_epoch=min(last_common + 1, self.plan.epochs))
        plan_msg = self.plan.to_message()
        out = [Outgoing(party, plan_msg) for party in self.remote]
        self.epoch = self.plan.start_epoch
        if self.epoch >= self.plan.epochs or self.result.stopped_early:
            self._finish()
            return out
        self._new_batches()
        self._set_train(True)
        return out + self._advance()

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        width = self.remote.get(sender)
        if width is None:
            raise ProtocolError(f"{self.name}: message from unknown party {sender!r}")
        if type(msg) is Embeddings and self._started and not self.done:
            if msg.values.shape[1] != width:
                got = msg.values.shape[1]
                raise ProtocolError(f"{self.name}: {sender!r} sent embeddings of width {got}, expected {width}")
            self._inbox[sender].append(msg)
            return self._advance()
        if isinstance(msg, Ready) and not self._started and sender not in self._ready:
            self._ready[sender] = msg.resume_epoch
            return self._begin() if len(self._ready) == len(self.remote) else []
        raise ProtocolError(f"{self.name}: {type(msg).__name__} from {sender!r} not expected now")

    # -- the schedule ----------------------------------------------------------------------------------------------
    def _advance(self) -> list[Outgoing]:
        out: list[Outgoing] = []
        while not self.done:
            if self.step < len(self._batches):
                got = self._take(TRAIN, 1)
                if got is None:
                    break
                out += self._train_step({p: msgs[0] for p, msgs in got.items()})
            else:
                got = self._take(EVAL, len(self._chunks))
                if got is None:
                    break
                out += self._end_epoch(got)
        return out

    def _take(self, phase: int, count: int) -> dict[str, list[Embeddings]] | None:
        """Pop ``count`` messages of ``phase`` from every party once all are in; check they are the expected ones."""
        for queue in self._inbox.values():
            if len(queue) < count:
                return None
        got = {p: [q.popleft() for _ in range(count)] for p, q in self._inbox.items()}
        for party, msgs in got.items():
            for i, msg in enumerate(msgs):
                want = (phase, self.epoch, self.step if phase == TRAIN else i)
                if (msg.phase, msg.epoch, msg.step) != want:
                    raise ProtocolError(
                        f"{self.name}: {party!r} sent phase/epoch/step "
                        f"{(msg.phase, msg.epoch, msg.step)}, expected {want}"
                    )
        return got

    def _new_batches(self) -> None:
        self._batches = self.plan.batches(self.epoch)
        self._index = [torch.from_numpy(rows) for rows in self._batches]  # torch indexes faster with its own tensors

    def _train_step(self, received: dict[str, Embeddings]) -> list[Outgoing]:
        index = self._index[self.step]
        size = len(index)
        leaves = {}
        for party, msg in received.items():
            if msg.values.shape[0] != size:
                raise ProtocolError(f"{self.name}: {party!r} sent {msg.values.shape[0]} rows, batch has {size}")
            if not all_finite(msg.values):
                raise ProtocolError(f"{self.name}: {party!r} sent non-finite embeddings")
            leaves[party] = torch.from_numpy(msg.values).requires_grad_()
        labels = self.labels[index]
        with self.rng:
            embeddings = {name: model(cat[index], num[index]) for name, (model, (cat, num)) in self.local.items()}
            logits = self.top({**embeddings, **leaves})
            loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
            clear_grads(self.optimizer)
            loss.backward()
        self.optimizer.step()
        out = []
        for party, leaf in leaves.items():
            grad = leaf.grad
            assert grad is not None
            if self.gradient_hooks:
                rows = self._batches[self.step]
                info = StepInfo(party=party, epoch=self.epoch, step=self.step, rows=rows, labels=labels)
                for hook in self.gradient_hooks:
                    grad = hook(grad, info)
                values = np.ascontiguousarray(grad.detach().numpy(), dtype=np.float32)
            else:
                values = grad.numpy()  # autograd's own gradient: contiguous float32 already
            out.append(Outgoing(party, Gradients(epoch=self.epoch, step=self.step, values=values)))
        value = float(loss.detach())
        self._losses.append(value)
        for callback in self.callbacks:
            if hasattr(callback, "on_step"):
                callback.on_step(self.epoch, self.step, len(self._batches), value)
        self.step += 1
        return out

    def _end_epoch(self, received: dict[str, list[Embeddings]]) -> list[Outgoing]:
        record: dict[str, Any] = {"epoch": self.epoch, "train_loss": float(np.mean(self._losses))}
        improved = True
        if self._chunks:
            logits = self._score_validation(received)
            rows = np.concatenate(self._chunks)
            y = self.labels[rows]
            record["val_loss"] = float(nn.functional.binary_cross_entropy_with_logits(logits, y))
            record["val_auc"] = roc_auc(y.numpy(), logits.numpy())
            score = record["val_auc"] if not math.isnan(record["val_auc"]) else -record["val_loss"]
            improved = self.result.best_score is None or score > self.result.best_score
            if improved:
                self.result.best_score = score
        if improved:
            self.result.best_epoch = self.epoch
            self._best_state = self._snapshot()
            self._since_best = 0
        else:
            self._since_best += 1
        stop = self.patience is not None and self._since_best > self.patience
        last = stop or self.epoch + 1 >= self.plan.epochs
        self.result.history.append(record)
        for callback in self.callbacks:
            if hasattr(callback, "on_epoch"):
                callback.on_epoch(record)
        out = [Outgoing(p, EpochEnd(epoch=self.epoch, improved=improved, stop=last)) for p in self.remote]
        if last:
            self.result.stopped_early = stop and self.epoch + 1 < self.plan.epochs
        if self.on_epoch_end is not None:
            self.on_epoch_end(self.state())
        if last:
            self._finish()
        else:
            self.epoch += 1
            self.step = 0
            self._new_batches()
            self._losses = []
        return out

    def _score_validation(self, received: dict[str, list[Embeddings]]) -> torch.Tensor:
        self._set_train(False)
        parts = []
        with torch.no_grad(), self.rng:
            for i, rows in enumerate(self._chunks):
                embeddings = {name: m(cat[rows], num[rows]) for name, (m, (cat, num)) in self.local.items()}
                for party, msgs in received.items():
                    if msgs[i].values.shape[0] != len(rows):
                        raise ProtocolError(f"{self.name}: {party!r} sent a validation chunk of the wrong size")
                    embeddings[party] = torch.from_numpy(msgs[i].values)
                parts.append(self.top(embeddings))
        self._set_train(True)
        return torch.cat(parts)

    # -- checkpoints -----------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to continue after the current epoch."""
        return {
            "epoch": self.epoch,
            "modules": {k: m.state_dict() for k, m in self._modules().items()},
            "optimizer": self.optimizer.state_dict(),
            "rng": self.rng.state,
            "best": self._best_state,
            "since_best": self._since_best,
            "history": self.result.history,
            "best_epoch": self.result.best_epoch,
            "best_score": self.result.best_score,
            "stopped_early": self.result.stopped_early,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state` saved after epoch ``state["epoch"]``."""
        for key, module in self._modules().items():
            module.load_state_dict(state["modules"][key])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.state = state["rng"]
        self._best_state = state["best"]
        self._since_best = state["since_best"]
        self.result = TrainingResult(
            history=list(state["history"]),
            best_epoch=state["best_epoch"],
            best_score=state["best_score"],
            stopped_early=state["stopped_early"],
        )

    # -- state -----------------------------------------------------------------------------------------------------
    def _modules(self) -> dict[str, nn.Module]:
        return {"top": self.top, **{f"bottom:{n}": m for n, (m, _) in self.local.items()}}

    def _set_train(self, mode: bool) -> None:
        for module in self._modules().values():
            module.train(mode)

    def _snapshot(self) -> dict[str, Any]:
        return {k: copy.deepcopy(m.state_dict()) for k, m in self._modules().items()}

    def _finish(self) -> None:
        if self._best_state is not None:
            for key, module in self._modules().items():
                module.load_state_dict(self._best_state[key])
        self._set_train(False)
        self.done = True
