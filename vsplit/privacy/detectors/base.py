"""What every detector is: an observer at the client that judges each gradient batch it receives, and stops the run.

Theory of operation. A detector is an :class:`~vsplit.protocol.training.hooks.Observer` of the party that receives
gradients (the client of a vanilla or U-shaped split). The training machine calls observers as soon as a gradient
batch has arrived and before it runs that step's backward, optimizer step or the next step's forward, so a detector
that raises :class:`~vsplit.errors.PrivacyAlarm` stops the party before it sends anything more: its pump tells the
peers only ``AbortCode.CANCELLED`` and the local error names the detector and its evidence. With ``stop=False`` a
detector only records (``detections``), which is how the benchmark measures when each detector would have fired on
one run.

All detectors here need the client's labels, which it has in both splits where they apply (a vanilla client hands
its labels to the server; a U-shaped client keeps them): :meth:`Detector.bind` gives them by aligned row position,
the order the training plan's ``rows`` use (:func:`aligned` computes it when every ID is shared).

Example:
    >>> import numpy as np
    >>> aligned(np.array(["b", "a", "c"], dtype=object), np.array([1, 0, 2])).tolist()
    [0, 1, 2]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from vsplit.data.tables import normalise_ids
from vsplit.errors import ConfigError, PrivacyAlarm
from vsplit.models.registry import Registry
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks

#: Detector names -> class.
DETECTORS: Registry[Callable[..., Detector]] = Registry("detector")


def aligned(ids: np.ndarray | pd.Series, values: np.ndarray | pd.Series) -> np.ndarray:
    """``values`` (one per ID) in aligned order: sorted by normalised ID, as training orders shared customers.

    Valid when the peer knows every one of these IDs (the training rows of a vanilla client and its server are the
    same customers); otherwise index by the estimator's ``rows_`` after alignment.
    """
    ids = normalise_ids(pd.Series(np.asarray(ids, dtype=object)))
    return np.asarray(values)[np.argsort(ids, kind="stable")]


@dataclass(frozen=True)
class Detection:
    """Where a detector fired (``step``: the number of gradient batches received before this one) and why."""

    detector: str
    epoch: int
    step: int
    statistic: float
    threshold: float
    evidence: str


@dataclass
class Record:
    epoch: int
    step: int
    value: float
    extra: dict[str, float] = field(default_factory=dict)


class Detector:
    """Base class: subclasses set ``name`` and implement :meth:`statistic` and :meth:`judge`.

    Args:
        stop: raise :class:`~vsplit.errors.PrivacyAlarm` when it fires (default); False only records.
    """

    name: ClassVar[str] = ""
    #: what the statistic is, for the error message
    measures: ClassVar[str] = ""

    def __init__(self, *, stop: bool = True) -> None:
        self.stop = stop
        self.config = self.name
        self.labels: np.ndarray | None = None
        self.canaries: np.ndarray | None = None
        self.history: list[Record] = []
        self.detections: list[Detection] = []
        self.batches = 0

    def bind(self, *, labels: np.ndarray, canaries: np.ndarray | None = None) -> Detector:
        """The client's labels by aligned row (and which rows are SplitGuard canaries, whose labels are fake)."""
        self.labels = np.asarray(labels)
        self.canaries = None if canaries is None else np.asarray(canaries, dtype=bool)
        return self

    def hooks(self, party: str) -> TrainingHooks:
        """This detector as ``party``'s observer (merge with other hooks by :func:`vsplit.privacy.merge_hooks`)."""
        return TrainingHooks(observers={party: [self]})

    @property
    def detected(self) -> bool:
        return bool(self.detections)

    @property
    def first(self) -> Detection | None:
        return self.detections[0] if self.detections else None

    def __call__(self, values: torch.Tensor, info: StepInfo) -> None:
        if not info.training or info.rows is None:
            return
        if self.labels is None:
            raise ConfigError(f"{self.name}: no labels bound; call bind(labels=...) before training")
        step = self.batches
        self.batches += 1
        rows = np.asarray(info.rows)
        value = self.statistic(values.detach().double(), rows)
        if value is None or not math.isfinite(value[0]):
            return
        self.history.append(Record(epoch=info.epoch, step=step, value=value[0], extra=value[1]))
        verdict = self.judge()
        if verdict is None or self.detections:
            return
        statistic, threshold, evidence = verdict
        found = Detection(detector=self.name, epoch=info.epoch, step=step, statistic=statistic, threshold=threshold,
                          evidence=evidence)
        self.detections.append(found)
        if self.stop:
            raise PrivacyAlarm(
                f"{info.party}: detector {self.name!r} flagged the gradients received at epoch {info.epoch}, step "
                f"{info.step} (batch {step}): {evidence}. The gradients do not look like honest training: the "
                "server may be hijacking it (e.g. FSHA). This party stopped before sending its next activations; "
                "investigate the server before training again",
                detection=found,
            )

    def statistic(self, grads: torch.Tensor, rows: np.ndarray) -> tuple[float, dict[str, float]] | None:
        """This batch's statistic (and extra figures to record), or None if the batch cannot be judged."""
        raise NotImplementedError

    def judge(self) -> tuple[float, float, str] | None:
        """After a new record: ``(statistic, threshold, evidence)`` if the detector fires now, else None."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<detector {self.config}>"


def label_groups(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boolean matrices of same-label pairs (off the diagonal) and different-label pairs of a batch."""
    same = labels[:, None] == labels[None, :]
    diff = ~same
    np.fill_diagonal(same, False)
    return same, diff


def cosine_matrix(grads: torch.Tensor) -> np.ndarray:
    """Pairwise cosine similarity of the rows of ``grads`` (zero rows give 0)."""
    unit = torch.nn.functional.normalize(grads, dim=1, eps=1e-30)
    return (unit @ unit.T).numpy()

