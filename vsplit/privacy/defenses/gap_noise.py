"""``gap_noise``: Gaussian noise only along the direction that separates the classes, plus even norms, at the label
party.

Theory of operation. With a binary cross-entropy loss the gradient an example sends is ``(p - y) · d logit / d e``;
when ``d logit / d e`` varies slowly, the gradients of one batch lie close to one line, the direction ``u`` of
``μ1 - μ0`` (the mean gradient of the batch's positives minus that of its negatives), and the label sits in the sign
and size of each gradient's coordinate along ``u``. This defense, knowing the batch's labels, estimates ``u`` and

1. adds to each gradient's coordinate along ``u`` Gaussian noise of standard deviation
   ``noise_multiplier · B``, ``B`` the batch's ``quantile``-th per-example gradient norm, so that the sign along
   ``u`` (what direction scoring reads) no longer follows the label;
2. with ``even_norms`` (the default), then adds isotropic noise that gives every example the same expected squared
   norm, the batch's largest (Li et al.'s ``max_norm``), so that norm scoring reads nothing either.

Unlike ``clip_noise``, step 1 puts no noise in the other ``d - 1`` directions, which carry no label signal to hide;
step 2 puts there only what evening out the norms needs. Positives and negatives get noise of the same law in step 1,
and noise decided by each gradient's own norm in step 2: an attacker who estimates ``u`` (say, by principal
components) finds the noised coordinate along it, not the clean one. A batch with one class only uses the ``u`` of
the last batch with both. There is no (ε, δ) statement: ``B`` and ``u`` depend on the batch's labels.

Example:
    >>> import torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> defense = GapNoise(noise_multiplier=0.0, even_norms=False)
    >>> defense.active
    False
    >>> hook = GapNoise(noise_multiplier=1.0, even_norms=False).hooks(feature_parties=["p"], seed=0).gradient_hooks[0]
    >>> grads = torch.tensor([[-0.8, 0.0, 0.1], [0.05, 0.0, 0.0], [0.04, 0.0, -0.1]])
    >>> info = StepInfo(party="p", epoch=0, step=0, rows=None, labels=torch.tensor([1.0, 0.0, 0.0]))
    >>> added = hook(grads, info) - grads
    >>> u = grads[0] - grads[1:].mean(0)  # positives' mean minus negatives' mean
    >>> u = u / u.norm()
    >>> bool((added - (added @ u).unsqueeze(1) * u).abs().max() < 1e-5)  # all of the noise is along u
    True
"""

from __future__ import annotations

import torch

from vsplit.errors import ConfigError
from vsplit.privacy.defenses.base import DEFENSES, Defense
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks


class _GapNoiseHook:
    def __init__(self, *, noise_multiplier: float, quantile: float, even_norms: bool, generator) -> None:
        self.noise_multiplier, self.quantile, self.even_norms = noise_multiplier, quantile, even_norms
        self.generator = generator
        self._u: torch.Tensor | None = None
        self._noise_to_signal: list[float] = []

    def direction(self, values: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        """The unit vector along ``μ1 - μ0`` of this batch (or the last batch that had both classes)."""
        positive = labels > 0.5
        if positive.any() and (~positive).any():
            gap = values[positive].mean(0) - values[~positive].mean(0)
            norm = gap.norm()
            if norm > 0:
                self._u = gap / norm
        return self._u

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        if info.labels is None:
            raise ConfigError("gap_noise runs at the label party as a gradient hook: it needs the batch's labels")
        grads = values.detach().double()
        out = grads
        u = self.direction(grads, info.labels.double())
        if u is not None and self.noise_multiplier > 0:
            bound = torch.quantile(torch.linalg.vector_norm(grads, dim=1), self.quantile)
            along = torch.randn(len(grads), generator=self.generator, dtype=torch.float64)
            out = out + (along * (self.noise_multiplier * bound)).unsqueeze(1) * u
        if self.even_norms:
            squared = (out**2).sum(dim=1)
            std = torch.sqrt((squared.max() - squared).clamp_min(0) / values.shape[1])
            out = out + torch.randn(values.shape, generator=self.generator, dtype=torch.float64) * std.unsqueeze(1)
        noise = out - grads
        self._noise_to_signal.append(float(noise.norm() / grads.norm().clamp_min(1e-30)))
        return out.to(values.dtype)

    def stats(self) -> dict[str, float]:
        n = len(self._noise_to_signal)
        return {"noise_to_signal": sum(self._noise_to_signal) / n} if n else {}


@DEFENSES.register("gap_noise")
class GapNoise(Defense):
    """Noise along the class-separating direction of each batch's gradients, then even norms (see the module).

    Args:
        noise_multiplier: standard deviation of the noise along ``u``, as a multiple of the batch's
            ``quantile``-th per-example gradient norm; 0 adds none.
        quantile: which per-example gradient norm of the batch sets the noise scale.
        even_norms: also add isotropic noise that gives every gradient the batch's largest expected norm.
    """

    name = "gap_noise"
    side = "label"

    def __init__(self, *, noise_multiplier: float = 1.0, quantile: float = 0.95, even_norms: bool = True) -> None:
        super().__init__()
        if noise_multiplier < 0:
            raise ConfigError(f"gap_noise: noise_multiplier must be >= 0, got {noise_multiplier}")
        if not 0 < quantile <= 1:
            raise ConfigError(f"gap_noise: quantile must be in (0, 1], got {quantile}")
        self.noise_multiplier, self.quantile, self.even_norms = noise_multiplier, quantile, bool(even_norms)

    @property
    def active(self) -> bool:
        return self.noise_multiplier > 0 or self.even_norms

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        hook = _GapNoiseHook(
            noise_multiplier=self.noise_multiplier, quantile=self.quantile, even_norms=self.even_norms,
            generator=self.generator(seed, "gradients"),
        )
        self._hooks = [hook]
        return TrainingHooks(gradient_hooks=[hook])


__all__ = ["GapNoise"]
