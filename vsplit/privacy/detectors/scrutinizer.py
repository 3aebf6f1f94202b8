"""The Gradients Scrutinizer (Fu et al., "Focusing on Pinocchio's Nose: A Gradients Scrutinizer to Thwart Split-
Learning Hijacking Attacks Using Intrinsic Attributes", NDSS 2023), at the client.

Theory of operation. With an honest server, the gradient the client receives for an example is the task loss's
gradient, ``Jᵀ (p − e_y)`` for a classifier: examples of the same label get gradients pointing much the same way,
examples of different labels do not. A hijacking server sends the gradients of its own objective (FSHA: a critic's
``∇D(z)``), which depend on the activations but not on the labels, so the two groups become alike. Per batch the
detector computes the mean cosine similarity of same-label pairs minus that of different-label pairs (the *gap*; the
client knows its labels) and fires when the median gap of the last ``window`` batches falls below ``threshold``. On
honest digits training the gap stays above 0.6; under FSHA it is below 0.1 from the first batch (see
``docs/privacy.md`` for the measured runs).

Canary rows of :class:`~vsplit.privacy.detectors.splitguard.SplitGuard` (fake labels) are left out when known.

Example:
    >>> import numpy as np, torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> labels = np.array([0, 0, 1, 1] * 8)
    >>> d = GradientScrutinizer(window=1, stop=False).bind(labels=labels)
    >>> honest = torch.tensor([[1.0, 0.0], [0.0, 1.0]])[labels] + 0.1 * torch.randn(32, 2)
    >>> d(honest, StepInfo(party="client", epoch=0, step=0, rows=np.arange(32)))
    >>> d.detected, d(torch.ones(32, 2), StepInfo(party="client", epoch=0, step=1, rows=np.arange(32))), d.detected
    (False, None, True)
"""

from __future__ import annotations

import numpy as np
import torch

from vsplit.errors import ConfigError
from vsplit.privacy.detectors.base import DETECTORS, Detector, cosine_matrix, label_groups


def similarity_gap(grads: torch.Tensor, labels: np.ndarray) -> tuple[float, float] | None:
    """Mean cosine of same-label pairs and of different-label pairs (None without pairs of both kinds)."""
    same, diff = label_groups(np.asarray(labels))
    if not same.any() or not diff.any():
        return None
    cos = cosine_matrix(grads)
    return float(cos[same].mean()), float(cos[diff].mean())


@DETECTORS.register("gradient_scrutinizer")
class GradientScrutinizer(Detector):
    """Fires when same-label gradients are no more alike than different-label ones.

    Args:
        threshold: fire when the median gap (same-label minus different-label mean cosine) is below this.
        window: batches in the median (the earliest detection is at batch ``window - 1``).
        stop: raise on detection (default) or only record.
    """

    name = "gradient_scrutinizer"

    def __init__(self, *, threshold: float = 0.25, window: int = 3, stop: bool = True) -> None:
        super().__init__(stop=stop)
        if window < 1 or not -2 < threshold < 2:
            raise ConfigError("gradient_scrutinizer: window must be >= 1 and threshold a gap in (-2, 2)")
        self.threshold, self.window = threshold, window

    def statistic(self, grads: torch.Tensor, rows: np.ndarray) -> tuple[float, dict[str, float]] | None:
        assert self.labels is not None
        keep = np.ones(len(rows), dtype=bool) if self.canaries is None else ~self.canaries[rows]
        found = similarity_gap(grads[torch.from_numpy(keep)], self.labels[rows[keep]])
        if found is None:
            return None
        same, diff = found
        return same - diff, {"same": same, "different": diff}

    def judge(self) -> tuple[float, float, str] | None:
        if len(self.history) < self.window:
            return None
        gap = float(np.median([r.value for r in self.history[-self.window :]]))
        if gap >= self.threshold:
            return None
        last = self.history[-1].extra
        return gap, self.threshold, (
            f"same-label gradients are no more alike than different-label ones (cosine gap {gap:.3f}, median of the "
            f"last {self.window} batches, below {self.threshold}; last batch: same-label {last['same']:.3f}, "
            f"different-label {last['different']:.3f})"
        )
