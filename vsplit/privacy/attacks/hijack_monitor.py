"""A feature party's monitor for a label party that hijacks training (experimental).

Motivation. In feature-space hijacking (Pasquini et al., "Unleashing the Tiger", CCS 2021) a malicious label party
stops sending the gradients of the shared task and sends those of its own objective instead, steering the feature
party's bottom model into a feature space the attacker can invert. The feature party cannot see the loss, but it sees
every gradient, and honest training leaves a signature in them.

Theory of operation. Honest binary training sends each example ``(p - y) · d logit / d e``: one shared direction
field scaled by a per-example number whose sign is the label. So the batch's gradient matrix is dominated by one
direction: the share of its energy in the top singular direction (the *concentration*) is high, typically 0.8 to 0.95,
and norms drift slowly as the loss falls. Gradients of a hijacking objective (matching embeddings to attacker-chosen
targets, a discriminator's loss) differ per example in direction: the concentration falls towards that of random
vectors, about ``(√B + √d)² / (B·d)`` for a batch of ``B`` gradients of width ``d``. Gross manipulation (large
scaling, sign flips by coordinate) shows as a jump in the norms.

The monitor calibrates on the first ``warmup_steps`` steps, then compares the median of each window of ``window``
steps with that reference: norms outside ``[ref / norm_factor, ref · norm_factor]`` or a concentration below
``concentration_drop × ref`` raise an :class:`Alarm`. With ``min_structure`` set it also alarms when the
concentration is within that factor of the random level, which catches an attack active from the first step.

What it cannot detect: an attacker that is malicious from the first step and keeps honest-looking statistics (e.g.
flipping every gradient's sign, which is gradient *ascent* with the same norms and concentration, or a hijacking
objective mixed into honest gradients at a small weight); attacks that only read what they receive (label-party
feature reconstruction is passive and leaves no trace in the gradients). And a label party that adds isotropic
noise as a defense (``clip_noise``) lowers the concentration by design: calibrate then with the defense on, and
leave ``min_structure`` off.

Example:
    >>> import numpy as np, torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> g = torch.Generator().manual_seed(0)
    >>> direction = torch.randn(8, generator=g)
    >>> monitor = HijackMonitor(warmup_steps=5, window=3)
    >>> for step in range(20):
    ...     honest = torch.randn(64, 1, generator=g) * direction + 0.05 * torch.randn(64, 8, generator=g)
    ...     hijack = torch.randn(64, 8, generator=g)
    ...     monitor(honest if step < 12 else hijack, StepInfo(party="partner", epoch=0, step=step, rows=None))
    >>> monitor.alarmed, monitor.alarms[0].step, monitor.alarms[0].reason
    (True, 13, 'direction spread')
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from vsplit.errors import ConfigError
from vsplit.protocol.training.hooks import StepInfo


@dataclass(frozen=True)
class Alarm:
    """A window of gradients that did not look like honest training: where, why, and the measured ratio."""

    epoch: int
    step: int
    reason: str
    ratio: float


def concentration(grads: torch.Tensor) -> float:
    """Share of a batch's gradient energy in its top singular direction (1: all gradients along one line).

    Example:
        >>> concentration(torch.tensor([[1.0, 0.0], [-2.0, 0.0]]))
        1.0
    """
    singular = torch.linalg.svdvals(grads.double())
    total = float((singular**2).sum())
    return float(singular[0] ** 2 / total) if total > 0 else 1.0


def random_concentration(batch: int, width: int) -> float:
    """The concentration of ``batch`` isotropic random vectors of dimension ``width`` (approximately)."""
    return min(1.0, (math.sqrt(batch) + math.sqrt(width)) ** 2 / (batch * width))


class HijackMonitor:
    """An :class:`~vsplit.protocol.training.hooks.Observer` at a feature party that flags drifting gradients.

    Args:
        warmup_steps: steps used as the honest reference.
        window: steps per compared window.
        norm_factor: alarm when the window's median norm leaves ``[ref / f, ref · f]``.
        concentration_drop: alarm when the window's concentration falls below this fraction of the reference.
        min_structure: if set, also alarm when the concentration is below this multiple of the random level.
    """

    def __init__(
        self,
        *,
        warmup_steps: int = 20,
        window: int = 10,
        norm_factor: float = 10.0,
        concentration_drop: float = 0.5,
        min_structure: float | None = None,
    ) -> None:
        if warmup_steps < 1 or window < 1 or norm_factor <= 1 or not 0 < concentration_drop < 1:
            raise ConfigError("HijackMonitor: need warmup_steps, window >= 1, norm_factor > 1, 0 < drop < 1")
        self.warmup_steps, self.window = warmup_steps, window
        self.norm_factor, self.concentration_drop, self.min_structure = norm_factor, concentration_drop, min_structure
        self.history: list[tuple[int, int, float, float]] = []
        self.alarms: list[Alarm] = []
        self._recent: deque[tuple[float, float, float]] = deque(maxlen=window)
        self._reference: tuple[float, float] | None = None

    @property
    def alarmed(self) -> bool:
        return bool(self.alarms)

    def __call__(self, values: torch.Tensor, info: StepInfo) -> None:
        grads = values.detach().double()
        norm = float(torch.linalg.vector_norm(grads, dim=1).median())
        conc = concentration(grads)
        level = random_concentration(*grads.shape)
        self.history.append((info.epoch, info.step, norm, conc))
        if len(self.history) <= self.warmup_steps:
            self._check_structure(info, conc, level)
            if len(self.history) == self.warmup_steps:
                warm = np.array([(n, c) for _, _, n, c in self.history])
                self._reference = (float(np.median(warm[:, 0])), float(np.median(warm[:, 1])))
            return
        self._recent.append((norm, conc, level))
        if len(self._recent) < self.window or self._reference is None:
            return
        ref_norm, ref_conc = self._reference
        recent = np.array(self._recent)
        norm_ratio = float(np.median(recent[:, 0])) / max(ref_norm, 1e-300)
        conc_ratio = float(np.median(recent[:, 1])) / max(ref_conc, 1e-300)
        if not 1 / self.norm_factor <= norm_ratio <= self.norm_factor:
            self._raise(info, "gradient norm", norm_ratio)
        elif conc_ratio < self.concentration_drop:
            self._raise(info, "direction spread", conc_ratio)
        else:
            self._check_structure(info, float(np.median(recent[:, 1])), float(np.median(recent[:, 2])))

    def _check_structure(self, info: StepInfo, conc: float, level: float) -> None:
        if self.min_structure is not None and conc < self.min_structure * level:
            self._raise(info, "no label structure", conc / level)

    def _raise(self, info: StepInfo, reason: str, ratio: float) -> None:
        self.alarms.append(Alarm(epoch=info.epoch, step=info.step, reason=reason, ratio=ratio))
        self._recent.clear()  # one alarm per window
