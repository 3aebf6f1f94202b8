"""Hooks that plug into training without the training machines importing them (defenses, attacks, monitors).

A :class:`GradientHook` runs at the label party on the gradient it is about to send to one party; an
:class:`EmbeddingHook` runs at a feature party on the embeddings it is about to send: training batches (inside the
autograd graph) and also validation and scoring chunks (``info.training`` is False there, under ``no_grad``), so a
transform such as clipping is the same at training and at scoring. Observers see what a party received. Every hook
gets a :class:`StepInfo` telling where in training it is.

Example:
    >>> import torch
    >>> class Halve:
    ...     def __call__(self, values, info):
    ...         return values / 2
    >>> Halve()(torch.ones(2), StepInfo(party="partner", epoch=0, step=0, rows=None)).tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch


@dataclass(frozen=True)
class StepInfo:
    """Where a hook is called: the party concerned, epoch, step and the aligned row positions of the batch.

    ``training`` is False for validation and scoring embeddings. ``labels`` holds the batch's training labels, and is
    set only for gradient hooks, which run at the label party (e.g. a defense that adds class-dependent noise);
    ``activations``, also only for gradient hooks, the activations ``info.party`` sent that the gradient is for (the
    label party received them: e.g. a defense whose noise is orthogonal to them).
    """

    party: str
    epoch: int
    step: int
    rows: np.ndarray | None
    training: bool = True
    labels: torch.Tensor | None = None
    activations: torch.Tensor | None = None


class GradientHook(Protocol):
    """Transforms the gradient the label party sends to ``info.party`` (e.g. clipping and noise)."""

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor: ...


class EmbeddingHook(Protocol):
    """Transforms the embeddings a feature party sends (e.g. noise); in training it runs inside the autograd graph.

    It also sees validation and scoring embeddings with ``info.training`` False: return them unchanged there unless
    the transform must hold at scoring as well (clipping does; training-time noise does not).
    """

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor: ...


class Observer(Protocol):
    """Sees a tensor a party received (gradients at a feature party), for attacks and monitors."""

    def __call__(self, values: torch.Tensor, info: StepInfo) -> None: ...


class LocalLoss(Protocol):
    """An extra loss term a feature party adds to its own bottom model (e.g. a NoPeek penalty)."""

    def __call__(self, inputs: tuple[torch.Tensor, torch.Tensor], embeddings: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class TrainingHooks:
    """What plugs into training without the training machine importing it.

    Attributes:
        gradient_hooks: at the label party, on each gradient before it is sent (defenses).
        embedding_hooks: per party, on the activations it sends (defenses); also at validation and scoring, with
            ``info.training`` False.
        observers: per party, callbacks that see each gradient it received (attacks, monitors).
        local_losses: per party, an extra loss on the activations its source segment sends (e.g. NoPeek).
        label_transform: at the label party, maps the aligned training labels (e.g. randomized response).
    """

    gradient_hooks: Sequence[GradientHook] = ()
    embedding_hooks: Mapping[str, Sequence[EmbeddingHook]] = field(default_factory=dict)
    observers: Mapping[str, Sequence[Observer]] = field(default_factory=dict)
    local_losses: Mapping[str, LocalLoss] = field(default_factory=dict)
    label_transform: Callable[[torch.Tensor], torch.Tensor] | None = None
