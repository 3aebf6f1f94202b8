"""The feature party's side of split training.

Theory of operation. The machine waits for the label party's :class:`TrainingPlan`, then for every batch of the
shared schedule it runs its bottom model on its own rows, sends the embeddings, waits for their gradient, back-
propagates it and steps its own optimizer. After each epoch it sends embeddings of the validation rows and waits for
:class:`EpochEnd`, which says whether to keep this epoch's weights and whether to stop. At the end it restores the
best weights. Its rows, its model and its optimizer never leave it; only embeddings do.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.errors import ProtocolError
from vsplit.models.optim import clear_grads
from vsplit.models.rng import PartyRng
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, all_finite
from vsplit.protocol.training.hooks import EmbeddingHook, LocalLoss, Observer, StepInfo
from vsplit.protocol.training.messages import EVAL, TRAIN, Embeddings, EpochEnd, Gradients, Ready, TrainingPlan
from vsplit.protocol.training.plan import Plan


class FeatureTrainer:
    """Trains one feature party's bottom model against a label party.

    Args:
        name: this party's name.
        label_party: the label party's name (the only peer this machine talks to).
        model: the bottom model, called as ``model(cat, num)``.
        optimizer: optimizer over ``model``'s parameters.
        inputs: ``(cat, num)`` tensors of this party's rows in the aligned order.
        rng: this party's random stream (dropout).
        embedding_hooks: transforms applied to embeddings before they are sent.
        observers: callbacks that see each gradient received.
        local_loss: an extra loss on this party's own embeddings.
        resume_epoch: the last epoch this party has a checkpoint of (-1: none); told to the label party.
        restore: returns this party's saved state of a given epoch (see :meth:`state`), for resuming.
        on_epoch_end: receives :meth:`state` after every epoch, to write a checkpoint.
    """

    def __init__(
        self,
        *,
        name: str,
        label_party: str,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        inputs: tuple[torch.Tensor, torch.Tensor],
        rng: PartyRng,
        embedding_hooks: Sequence[EmbeddingHook] = (),
        observers: Sequence[Observer] = (),
        local_loss: LocalLoss | None = None,
        resume_epoch: int = -1,
        restore: Callable[[int], dict[str, Any]] | None = None,
        on_epoch_end: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.name = name
        self.label_party = label_party
        self.model = model
        self.optimizer = optimizer
        self.cat, self.num = inputs
        self.rng = rng
        self.embedding_hooks = list(embedding_hooks)
        self.observers = list(observers)
        self.local_loss = local_loss
        self.plan: Plan | None = None
        self.epoch = 0
        self.step = 0
        self._batches: list[np.ndarray] = []
        self._index: list[torch.Tensor] = []
        self._pending: torch.Tensor | None = None
        self._pending_inputs: tuple[torch.Tensor, torch.Tensor] | None = None
        self._best: dict[str, Any] | None = None
        self._state = "wait_plan"
        self.done = False
        self.result: dict[str, Any] | None = None
        self.epochs_run = 0
        self.resume_epoch = resume_epoch
        self.restore = restore
        self.on_epoch_end = on_epoch_end

    # -- machine interface -----------------------------------------------------------------------------------------
    def start(self) -> list[Outgoing]:
        return [Outgoing(self.label_party, Ready(resume_epoch=self.resume_epoch))]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if sender != self.label_party:
            raise ProtocolError(f"{self.name}: unexpected message from {sender!r}")
        if self._state == "wait_grad" and type(msg) is Gradients:
            return self._on_gradients(msg)
        if self._state == "wait_plan" and isinstance(msg, TrainingPlan):
            return self._on_plan(msg)
        if self._state == "wait_epoch_end" and isinstance(msg, EpochEnd):
            return self._on_epoch_end(msg)
        raise ProtocolError(f"{self.name}: {type(msg).__name__} not expected while in state {self._state}")

    # -- transitions -----------------------------------------------------------------------------------------------
    def _on_plan(self, msg: TrainingPlan) -> list[Outgoing]:
        if len(msg.roles) != len(self.cat):
            raise ProtocolError(
                f"{self.name}: plan covers {len(msg.roles)} aligned rows, this party has {len(self.cat)}",
                code=AbortCode.CONFIG_MISMATCH,
            )
        self.plan = Plan.from_message(msg)
        if self.plan.start_epoch > 0:
            if self.restore is None or self.plan.start_epoch - 1 > self.resume_epoch:
                raise ProtocolError(
                    f"{self.name}: asked to resume after epoch {self.plan.start_epoch - 1}, which this party has no "
                    "checkpoint of",
                    code=AbortCode.CONFIG_MISMATCH,
                )
            self.load_state(self.restore(self.plan.start_epoch - 1))
        if self.plan.start_epoch >= self.plan.epochs:
            self._finish()
            return []
        return self._begin_epoch(self.plan.start_epoch)

    def _begin_epoch(self, epoch: int) -> list[Outgoing]:
        assert self.plan is not None
        self.epoch, self.step = epoch, 0
        self._batches = self.plan.batches(epoch)
        self._index = [torch.from_numpy(rows) for rows in self._batches]  # torch indexes faster with its own tensors
        self.model.train()
        return self._send_batch()

    def _send_batch(self) -> list[Outgoing]:
        index = self._index[self.step]
        inputs = (self.cat[index], self.num[index])
        with self.rng:
            embeddings = self.model(*inputs)
            if self.embedding_hooks:
                info = StepInfo(party=self.name, epoch=self.epoch, step=self.step, rows=self._batches[self.step])
                for hook in self.embedding_hooks:
                    embeddings = hook(embeddings, info)
        self._pending, self._pending_inputs = embeddings, inputs
        self._state = "wait_grad"
        values = embeddings.detach().numpy()
        return [Outgoing(self.label_party, Embeddings(phase=TRAIN, epoch=self.epoch, step=self.step, values=values))]

    def _on_gradients(self, msg: Gradients) -> list[Outgoing]:
        assert self._pending is not None and self._pending_inputs is not None
        if (msg.epoch, msg.step) != (self.epoch, self.step):
            raise ProtocolError(
                f"{self.name}: gradient for epoch {msg.epoch} step {msg.step}, expected {self.epoch}/{self.step}"
            )
        if msg.values.shape != self._pending.shape:
            shape = tuple(self._pending.shape)
            raise ProtocolError(f"{self.name}: gradient shape {msg.values.shape} != embeddings {shape}")
        grad = torch.from_numpy(msg.values)
        if not all_finite(msg.values):
            raise ProtocolError(f"{self.name}: received non-finite gradients")
        if self.observers:
            info = StepInfo(party=self.name, epoch=self.epoch, step=self.step, rows=self._batches[self.step])
            for observe in self.observers:
                observe(grad, info)
        clear_grads(self.optimizer)
        if self.local_loss is None:
            torch.autograd.backward(self._pending, grad)  # draws no random numbers: no need to swap in self.rng
        else:
            with self.rng:
                extra = self.local_loss(self._pending_inputs, self._pending)
                torch.autograd.backward([self._pending, extra], [grad, torch.ones_like(extra)])
        self.optimizer.step()
        self._pending = self._pending_inputs = None
        self.step += 1
        if self.step < len(self._batches):
            return self._send_batch()
        return self._send_validation()

    def _send_validation(self) -> list[Outgoing]:
        assert self.plan is not None
        self.model.eval()
        out = []
        with torch.no_grad(), self.rng:
            for i, rows in enumerate(self.plan.eval_chunks()):
                values = self.model(self.cat[rows], self.num[rows])
                info = StepInfo(party=self.name, epoch=self.epoch, step=i, rows=rows, training=False)
                for hook in self.embedding_hooks:
                    values = hook(values, info)
                values = values.numpy()
                out.append(Outgoing(self.label_party, Embeddings(phase=EVAL, epoch=self.epoch, step=i, values=values)))
        self.model.train()
        self._state = "wait_epoch_end"
        return out

    def _on_epoch_end(self, msg: EpochEnd) -> list[Outgoing]:
        assert self.plan is not None
        if msg.epoch != self.epoch:
            raise ProtocolError(f"{self.name}: epoch end for {msg.epoch}, expected {self.epoch}")
        self.epochs_run += 1
        if msg.improved:
            self._best = copy.deepcopy(self.model.state_dict())
        if self.on_epoch_end is not None:
            self.on_epoch_end(self.state())
        if msg.stop or self.epoch + 1 >= self.plan.epochs:
            self._finish()
            return []
        return self._begin_epoch(self.epoch + 1)

    # -- checkpoints -----------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything needed to continue after the current epoch: weights, optimizer, RNG, best weights."""
        return {
            "epoch": self.epoch,
            "epochs_run": self.epochs_run,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": self.rng.state,
            "best": self._best,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state` saved after epoch ``state["epoch"]``."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.state = state["rng"]
        self._best = state["best"]
        self.epochs_run = state["epochs_run"]
        self.epoch = state["epoch"]

    def _finish(self) -> None:
        if self._best is not None:
            self.model.load_state_dict(self._best)
        self.model.eval()
        self._state = "done"
        self.done = True
        self.result = {"epochs_run": self.epochs_run}
