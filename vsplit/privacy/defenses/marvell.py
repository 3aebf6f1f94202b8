"""Marvell (Li et al., "Label Leakage and Protection in Two-party Split Learning", ICLR 2022), at the label party.

Theory of operation. For each batch the label party, who knows the labels, estimates the gradients' class-
conditional distributions as Gaussians: means ``μ1`` (positives) and ``μ0`` (negatives), isotropic within-class
variances ``v1`` and ``v0``. It adds zero-mean Gaussian noise of a class-dependent covariance ``Σ1`` or ``Σ0``
chosen to make the two perturbed distributions as alike as possible: it minimises their symmetrised KL divergence
(which bounds the AUC of *any* scoring attack, norm and direction included) subject to a noise power budget
``p·tr(Σ1) + (1 - p)·tr(Σ0) <= power · ||μ1 - μ0||²``, with ``p`` the batch's share of positives. As in the paper
the covariances are searched in the form ``Σy = ay·uuᵀ + by·(I - uuᵀ)``, ``u`` the direction of ``μ1 - μ0``, which
leaves a four-variable problem solved numerically (SciPy's SLSQP) once per batch. A batch with one class only gets
the noise of the last batch that had both.

Example:
    >>> import torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> hook = Marvell(power=4.0).hooks(feature_parties=["p"], seed=0).gradient_hooks[0]
    >>> grads = torch.cat([torch.full((4, 3), 0.01), torch.full((2, 3), -0.5)])
    >>> labels = torch.tensor([0.0, 0, 0, 0, 1, 1])
    >>> info = StepInfo(party="p", epoch=0, step=0, rows=None, labels=labels)
    >>> hook(grads, info).shape
    torch.Size([6, 3])
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import minimize

from vsplit.errors import ConfigError
from vsplit.privacy.defenses.base import DEFENSES, Defense
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks


def symmetric_kl(x: np.ndarray, *, v0: float, v1: float, gap2: float, dim: int) -> float:
    """Symmetrised KL of ``N(μ0, v0·I + Σ0)`` and ``N(μ1, v1·I + Σ1)`` for ``x = (a0, b0, a1, b1)``."""
    a0, b0, a1, b1 = x
    s0, s1 = v0 + a0, v1 + a1  # variances along u
    t0, t1 = v0 + b0, v1 + b1  # variances across u
    along = s1 / s0 + s0 / s1 - 2 + gap2 * (1 / s0 + 1 / s1)
    across = (dim - 1) * (t1 / t0 + t0 / t1 - 2)
    return 0.5 * (along + across)


def optimal_noise(
    *, v0: float, v1: float, gap2: float, dim: int, positive_share: float, power: float
) -> tuple[tuple[float, float, float, float], float]:
    """The ``(a0, b0, a1, b1)`` minimising :func:`symmetric_kl` within the power budget ``power · gap2``, and that KL.

    Example:
        >>> (a0, b0, a1, b1), kl = optimal_noise(v0=0.0, v1=0.0, gap2=1.0, dim=4, positive_share=0.5, power=1.0)
        >>> bool(0.5 * (a0 + 3 * b0) + 0.5 * (a1 + 3 * b1) <= 1.0 + 1e-6), round(float(kl), 2)
        (True, 1.0)
    """
    floor = 1e-9 * max(gap2, 1e-30)
    v0, v1 = max(v0, floor), max(v1, floor)
    p = positive_share
    budget = power * gap2
    weights = np.array([1 - p, (1 - p) * (dim - 1), p, p * (dim - 1)])
    scale = max(gap2, v0, v1)  # solve in units of the problem's scale

    def objective(y: np.ndarray) -> float:
        return symmetric_kl(y * scale, v0=v0, v1=v1, gap2=gap2, dim=dim)

    start = np.array([budget, 0.0, budget, 0.0]) / scale
    result = minimize(
        objective,
        start,
        method="SLSQP",
        bounds=[(0, None)] * 4,
        constraints=[{"type": "ineq", "fun": lambda y: budget / scale - weights @ y}],
        options={"maxiter": 100, "ftol": 1e-9},
    )
    best = result.x if result.success and objective(result.x) <= objective(start) else start
    a0, b0, a1, b1 = (float(max(v, 0.0)) * scale for v in best)
    return (a0, b0, a1, b1), float(objective(best))


class _MarvellHook:
    def __init__(self, *, power: float, generator: torch.Generator) -> None:
        self.power = power
        self.generator = generator
        self._last: tuple[torch.Tensor, tuple[float, float, float, float]] | None = None
        self._noise_to_signal: list[float] = []
        self._kl: list[float] = []

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        if info.labels is None:
            raise ConfigError("marvell runs at the label party as a gradient hook: it needs the batch's labels")
        grads = values.detach().double()
        positive = info.labels.numpy() > 0.5
        if positive.any() and (~positive).any():
            g1, g0 = grads[torch.from_numpy(positive)], grads[torch.from_numpy(~positive)]
            gap = g1.mean(0) - g0.mean(0)
            gap2 = float(gap @ gap)
            if gap2 > 0:
                v1 = float(g1.var(0, unbiased=False).mean()) if len(g1) > 1 else 0.0
                v0 = float(g0.var(0, unbiased=False).mean()) if len(g0) > 1 else 0.0
                dim = values.shape[1]
                noise, kl = optimal_noise(
                    v0=v0, v1=v1, gap2=gap2, dim=dim, positive_share=float(positive.mean()), power=self.power
                )
                self._kl.append(kl)
                self._last = (gap / gap.norm(), noise)
        if self._last is None:
            return values
        u, (a0, b0, a1, b1) = self._last
        z = torch.randn(values.shape, generator=self.generator, dtype=torch.float64)
        along = z @ u
        across = z - along.unsqueeze(1) * u
        labels = torch.from_numpy(positive)
        a = torch.where(labels, torch.tensor(a1), torch.tensor(a0)).double()
        b = torch.where(labels, torch.tensor(b1), torch.tensor(b0)).double()
        noise = a.sqrt().unsqueeze(1) * along.unsqueeze(1) * u + b.sqrt().unsqueeze(1) * across
        self._noise_to_signal.append(float(noise.norm() / grads.norm().clamp_min(1e-30)))
        return values + noise.to(values.dtype)

    def stats(self) -> dict[str, float]:
        out = {}
        if self._noise_to_signal:
            out["noise_to_signal"] = float(np.mean(self._noise_to_signal))
        if self._kl:
            out["symmetric_kl_median"] = float(np.median(self._kl))  # of the Gaussian model, after noise
        return out


@DEFENSES.register("marvell")
class Marvell(Defense):
    """Marvell: class-dependent Gaussian gradient noise that minimises the leak any scoring attack can reach.

    Args:
        power: the noise power budget as a multiple of ``||μ1 - μ0||²`` (the paper's scale ``s``); 0 turns it off.
    """

    name = "marvell"
    side = "label"

    def __init__(self, *, power: float = 10.0) -> None:
        super().__init__()
        if power < 0:
            raise ConfigError(f"marvell: power must be >= 0, got {power}")
        self.power = power

    @property
    def active(self) -> bool:
        return self.power > 0

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        hook = _MarvellHook(power=self.power, generator=self.generator(seed, "gradients"))
        self._hooks = [hook]
        return TrainingHooks(gradient_hooks=[hook])
