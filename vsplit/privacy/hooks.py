"""Putting several defenses and attacks into one :class:`~vsplit.estimator.TrainingHooks`, and a recording tap.

Example:
    >>> from vsplit.protocol.training.hooks import TrainingHooks
    >>> a = TrainingHooks(observers={"partner": ["attack"]})
    >>> b = TrainingHooks(observers={"partner": ["monitor"]}, gradient_hooks=["defense"])
    >>> merged = merge_hooks(a, b)
    >>> merged.observers["partner"], list(merged.gradient_hooks)
    (['attack', 'monitor'], ['defense'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from vsplit.errors import ConfigError
from vsplit.protocol.training.hooks import LocalLoss, StepInfo, TrainingHooks


class SumOfLosses:
    """Several :class:`~vsplit.protocol.training.hooks.LocalLoss` es added up."""

    def __init__(self, losses: Sequence[LocalLoss]) -> None:
        self.losses = list(losses)

    def __call__(self, inputs: tuple[torch.Tensor, torch.Tensor], embeddings: torch.Tensor) -> torch.Tensor:
        total = self.losses[0](inputs, embeddings)
        for loss in self.losses[1:]:
            total = total + loss(inputs, embeddings)
        return total


def _compose(first: Callable, second: Callable) -> Callable:
    return lambda labels: second(first(labels))


def merge_hooks(*parts: TrainingHooks) -> TrainingHooks:
    """One ``TrainingHooks`` with every part's hooks, in the order given (defenses before attacks that observe)."""
    gradient_hooks: list = []
    embedding_hooks: dict[str, list] = {}
    observers: dict[str, list] = {}
    losses: dict[str, list] = {}
    transform = None
    for part in parts:
        gradient_hooks += list(part.gradient_hooks)
        for party, hooks in part.embedding_hooks.items():
            embedding_hooks.setdefault(party, []).extend(hooks)
        for party, hooks in part.observers.items():
            observers.setdefault(party, []).extend(hooks)
        for party, loss in part.local_losses.items():
            losses.setdefault(party, []).append(loss)
        if part.label_transform is not None:
            transform = part.label_transform if transform is None else _compose(transform, part.label_transform)
    return TrainingHooks(
        gradient_hooks=gradient_hooks,
        embedding_hooks=embedding_hooks,
        observers=observers,
        local_losses={p: ls[0] if len(ls) == 1 else SumOfLosses(ls) for p, ls in losses.items()},
        label_transform=transform,
    )


class EmbeddingTap:
    """Records the training embeddings a feature party sends, as the label party receives them.

    Put it last among the party's embedding hooks: it returns its input unchanged and keeps the embeddings of the
    most recent epoch, which after training is the last epoch the label party saw.

    Example:
        >>> tap = EmbeddingTap()
        >>> _ = tap(torch.ones(2, 3), StepInfo(party="partner", epoch=0, step=0, rows=np.array([4, 1])))
        >>> rows, values = tap.last_epoch()
        >>> rows.tolist(), values.shape
        ([4, 1], (2, 3))
    """

    def __init__(self) -> None:
        self.epoch: int | None = None
        self._rows: list[np.ndarray] = []
        self._values: list[np.ndarray] = []

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        if not info.training or info.rows is None:
            return values
        if info.epoch != self.epoch:
            self.epoch, self._rows, self._values = info.epoch, [], []
        self._rows.append(np.asarray(info.rows).copy())
        self._values.append(values.detach().numpy().copy())
        return values

    def last_epoch(self) -> tuple[np.ndarray, np.ndarray]:
        """Aligned row positions and the embeddings received for them in the last recorded epoch."""
        if not self._rows:
            raise ConfigError("the tap recorded nothing; attach it as the feature party's last embedding hook")
        return np.concatenate(self._rows), np.concatenate(self._values)
