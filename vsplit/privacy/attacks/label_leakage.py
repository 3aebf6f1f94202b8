"""Label leakage from the gradients a feature party receives: norm and direction scoring (Li et al., ICLR 2022).

Theory of operation. With a binary cross-entropy loss the gradient of an example's loss with respect to its logit
is ``p - y``, and the gradient a feature party receives for its embedding is that number times ``d logit / d e``.
On imbalanced data the model predicts small ``p`` for everyone early on, so positives (``|p - 1|`` large) get
larger gradients than negatives (``p`` small): scoring each example by its gradient norm separates the classes
(*norm scoring*). And since ``p - y`` changes sign with the label while ``d logit / d e`` varies slowly, gradients
of positives point one way and those of negatives the other: the cosine with the gradient of one known positive
example of the same batch separates them almost perfectly (*direction scoring*).

Both attacks are :class:`~vsplit.protocol.training.hooks.Observer` s at the feature party: they see exactly the
gradients that party received, after any defense. They record a score per example and batch; the labels are used
only afterwards, to measure: each batch's leak AUC is ``max(AUC, 1 - AUC)`` of the scores against the true labels
(an attacker can choose the sign), and :meth:`summary` reports the mean and 95th percentile over all batches and
epochs.

Example:
    >>> import numpy as np, torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> grads = torch.tensor([[3.0, 0.0], [-0.1, 0.0], [-0.2, 0.1], [2.5, 0.5]])
    >>> norm = NormScoring()
    >>> norm(grads, StepInfo(party="partner", epoch=0, step=0, rows=np.arange(4)))
    >>> norm.summary(np.array([1, 0, 0, 1])).mean
    1.0
    >>> direction = DirectionScoring(known_positives=[0])
    >>> direction(grads, StepInfo(party="partner", epoch=0, step=0, rows=np.arange(4)))
    >>> direction.summary(np.array([1, 0, 0, 1])).mean
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import torch

from vsplit.metrics import roc_auc
from vsplit.protocol.training.hooks import StepInfo


def leak_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """``max(AUC, 1 - AUC)`` of ``scores`` for ``labels`` (NaN if a class is missing): the attacker picks the sign.

    Example:
        >>> leak_auc(np.array([0, 1, 0, 1]), np.array([0.9, 0.1, 0.8, 0.2]))
        1.0
    """
    auc = roc_auc(np.asarray(labels), np.asarray(scores))
    return auc if math.isnan(auc) else max(auc, 1.0 - auc)


def chance_leak_auc(n_positive: int, n_negative: int) -> float:
    """Expected ``max(AUC, 1 - AUC)`` of scores that carry no information, for one batch of that class balance.

    The AUC of random scores has mean 0.5 and variance ``(n1 + n0 + 1) / (12 n1 n0)``; taking the better sign adds
    about ``sd · sqrt(2 / π)``. So a batch of 64 with 8 positives shows 0.59 even for a perfect defense.

    Example:
        >>> round(chance_leak_auc(8, 56), 3), round(chance_leak_auc(30, 226), 3)
        (0.588, 0.545)
    """
    sd = math.sqrt((n_positive + n_negative + 1) / (12 * n_positive * n_negative))
    return 0.5 + sd * math.sqrt(2 / math.pi)


@dataclass(frozen=True)
class LeakSummary:
    """Leak AUC over batches: ``mean`` and 95th percentile ``p95`` over the ``batches`` that had both classes.

    ``chance`` is the mean leak AUC that scores without information would show on the same batches (see
    :func:`chance_leak_auc`): the floor a perfect defense reaches.
    """

    mean: float
    p95: float
    batches: int
    per_batch: np.ndarray
    chance: float = math.nan


class BatchScoring:
    """Base of the per-batch label attacks: records a score for each example of each received gradient batch."""

    def __init__(self) -> None:
        self.records: list[tuple[np.ndarray, np.ndarray]] = []

    def __call__(self, values: torch.Tensor, info: StepInfo) -> None:
        if info.rows is None:
            return
        scores = self.score(values.detach().double(), np.asarray(info.rows))
        self.records.append((np.asarray(info.rows), scores))

    def score(self, grads: torch.Tensor, rows: np.ndarray) -> np.ndarray:
        """Scores of the batch's examples (NaN for examples the attack does not score)."""
        raise NotImplementedError

    def summary(self, labels: np.ndarray) -> LeakSummary:
        """Leak AUC per recorded batch against ``labels`` (0/1, indexed by aligned row), then mean and p95."""
        labels = np.asarray(labels)
        aucs, chance = [], []
        for rows, scores in self.records:
            keep = ~np.isnan(scores)
            y = labels[rows[keep]]
            auc = leak_auc(y, scores[keep])
            if not math.isnan(auc):
                aucs.append(auc)
                chance.append(chance_leak_auc(int(y.sum()), int(len(y) - y.sum())))
        per_batch = np.array(aucs)
        if not len(per_batch):
            return LeakSummary(mean=math.nan, p95=math.nan, batches=0, per_batch=per_batch)
        return LeakSummary(
            mean=float(per_batch.mean()), p95=float(np.percentile(per_batch, 95)), batches=len(per_batch),
            per_batch=per_batch, chance=float(np.mean(chance)),
        )


class NormScoring(BatchScoring):
    """Scores each example by the L2 norm of its gradient."""

    def score(self, grads: torch.Tensor, rows: np.ndarray) -> np.ndarray:
        return torch.linalg.vector_norm(grads, dim=1).numpy()


class DirectionScoring(BatchScoring):
    """Scores each example by the cosine of its gradient with that of one known positive of the same batch.

    Args:
        known_positives: aligned row positions of examples the attacker knows to be positive. In each batch the
            first of them (in batch order) is the reference; it is not scored itself. Batches without one are
            skipped. If None, the gradients are kept and the positives are given to :meth:`summary` instead (for
            audits, where the alignment is known only after training).
    """

    def __init__(self, *, known_positives: Collection[int] | np.ndarray | None = None) -> None:
        super().__init__()
        self.known_positives = None if known_positives is None else self._as_rows(known_positives)
        self._kept: list[tuple[np.ndarray, torch.Tensor]] = []

    @staticmethod
    def _as_rows(rows: Collection[int] | np.ndarray) -> np.ndarray:
        return np.unique(np.asarray(list(rows), dtype=np.int64))

    def __call__(self, values: torch.Tensor, info: StepInfo) -> None:
        if self.known_positives is None and info.rows is not None:
            self._kept.append((np.asarray(info.rows).copy(), values.detach().float().clone()))
        else:
            super().__call__(values, info)

    def score(self, grads: torch.Tensor, rows: np.ndarray) -> np.ndarray:
        assert self.known_positives is not None
        known = np.flatnonzero(np.isin(rows, self.known_positives))
        scores = np.full(len(rows), np.nan)
        if not len(known):
            return scores
        reference = grads[known[0]]
        cosine = torch.nn.functional.cosine_similarity(grads, reference.unsqueeze(0), dim=1, eps=1e-30)
        scores[:] = cosine.numpy()
        scores[known[0]] = np.nan
        return scores

    def summary(
        self, labels: np.ndarray, *, known_positives: Collection[int] | np.ndarray | None = None
    ) -> LeakSummary:
        """As :meth:`BatchScoring.summary`; ``known_positives`` (default: every positive) if none were given before."""
        if self._kept:
            self.known_positives = self._as_rows(
                np.flatnonzero(np.asarray(labels) == 1) if known_positives is None else known_positives
            )
            self.records = [(rows, self.score(grads.double(), rows)) for rows, grads in self._kept]
        return super().summary(labels)
