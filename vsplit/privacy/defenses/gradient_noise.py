"""Label-party defenses on the gradients it sends: clipping plus Gaussian noise, and Li et al.'s ``max_norm``.

``clip_noise`` clips each example's gradient to a norm ``C`` (by default the batch's ``quantile``-th per-example
norm, so that the few large gradients of positives stop standing out) and adds ``N(0, (noise_multiplier · C)²)``
to every coordinate. ``max_norm`` (Li et al., ICLR 2022, their heuristic baseline) adds to each example just
enough isotropic noise that every gradient's expected squared norm equals the batch's largest one, which hides
norms but leaves directions.

With ``centred``, the noise of a batch is centred (its mean over the batch's examples taken out, the rest scaled
back to the same variance per example): every example's gradient gets noise of the same law as without, but the noise
adds nothing to the batch's sum, so the partner's update of a layer whose input is the same for every example (a
bias) is noise-free, and noise the partner's layers see through a common part of their inputs cancels. The price:
the batch's summed gradient reaches the partner exactly, and with it, roughly, how many positives the batch holds.

With ``orthogonal`` the noise of a batch is, further, orthogonal over the batch to each coordinate of the activations
the gradient is for (the partner's cut activations, which the label party received) as well as to the constant: the
partner's update of a linear map of those activations, its cut layer's weights seen through their output, gets no
noise either. Every example keeps noise of the same average variance (the rest scaled back), though an example whose
activations stand far out (a high leverage) gets less than the others. The price: the batch's summed gradient and its
sums weighted by each activation coordinate reach the partner exactly. ``orthogonal=K`` (a whole number) takes out only
the constant and the batch's ``K`` leading principal directions of the activations: less is released exactly, and
less of the noise is kept off the partner's update.

With ``warmup_epochs`` the first epochs use ``warmup_noise_multiplier`` instead: while the model is untrained the
gradients of one class point the same way most clearly (on bank_marketing the direction attack reads 0.71 in the
first epoch against 0.58 to 0.60 later, at the same noise), so more noise there and less afterwards protects the
same on average for less utility (see docs/privacy.md, the label-defense frontier).

With a fixed ``clip_norm`` the per-example release has an (ε, δ) statement; with quantile clipping the threshold
depends on the batch's labels and no statement applies. Either way the labels also reach the feature party through
the top model's later gradients, which no per-release accounting covers.

Example:
    >>> import torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> hook = ClipNoise(quantile=0.5, noise_multiplier=0.0).hooks(feature_parties=["p"], seed=0).gradient_hooks[0]
    >>> clipped = hook(torch.tensor([[3.0, 4.0], [0.6, 0.8]]), StepInfo(party="p", epoch=0, step=0, rows=None))
    >>> clipped.norm(dim=1).round(decimals=3).tolist()  # clipped at the median norm, 3.0
    [3.0, 1.0]
"""

from __future__ import annotations

import torch

from vsplit.errors import ConfigError
from vsplit.privacy.accounting import Guarantee, gaussian_guarantee
from vsplit.privacy.defenses.base import DEFENSES, Defense
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks


def orthogonal_noise(noise: torch.Tensor, activations: torch.Tensor | None, components: int | None = None
                     ) -> torch.Tensor:
    """``noise`` (one row per example) made orthogonal over the batch to the constant and to every column of
    ``activations`` (with ``components``, to its that many leading principal directions over the batch only), then
    scaled back to the same mean variance per example. A batch with no more examples than those columns plus one gets
    centred noise only.

    Example:
        >>> noise, acts = torch.randn(64, 4, dtype=torch.float64), torch.randn(64, 8, dtype=torch.float64)
        >>> out = orthogonal_noise(noise, acts)
        >>> bool(out.sum(0).abs().max() < 1e-9), bool((acts.T @ out).abs().max() < 1e-9)
        (True, True)
    """
    if activations is None:
        raise ConfigError("orthogonal noise (clip_noise, max_norm) runs at the label party as a gradient hook: it "
                          "needs the activations the gradient is for (StepInfo.activations)")
    rows = len(noise)
    columns = activations.detach().reshape(rows, -1).to(torch.float64)
    if components is not None and rows > 1:
        left, _, _ = torch.linalg.svd(columns - columns.mean(dim=0, keepdim=True), full_matrices=False)
        columns = left[:, :components]
    basis = torch.cat([torch.ones(rows, 1, dtype=torch.float64), columns], dim=1)
    if rows <= basis.shape[1] + 1:
        basis = basis[:, :1]  # too few examples to take out every coordinate: only the constant
    if rows <= 1:
        return noise
    q, _ = torch.linalg.qr(basis)
    wide = noise.to(torch.float64)
    wide = (wide - q @ (q.T @ wide)) * (rows / (rows - q.shape[1])) ** 0.5
    return wide.to(noise.dtype)


def shaped_noise(noise: torch.Tensor, info: StepInfo, *, centred: bool, orthogonal: bool | int) -> torch.Tensor:
    """``noise`` as the options say: orthogonal to the activations (:func:`orthogonal_noise`; ``True`` to all of
    them, a number to that many principal directions), else centred (zero sum over the batch, the same variance per
    example), else as drawn."""
    if orthogonal:
        return orthogonal_noise(noise, info.activations, None if orthogonal is True else int(orthogonal))
    if centred and len(noise) > 1:
        return (noise - noise.mean(dim=0, keepdim=True)) * (len(noise) / (len(noise) - 1)) ** 0.5
    return noise


def _orthogonal(name: str, value: object) -> bool | int:
    """The ``orthogonal`` option checked: true, false, or a whole number of principal directions >= 1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value >= 0:
        return value or False
    raise ConfigError(f"{name}: orthogonal must be true, false or a whole number of principal directions >= 1, "
                      f"got {value!r}")


class _ClipNoiseHook:
    def __init__(self, *, quantile: float, noise_multiplier: float, clip_norm: float | None, generator,
                 centred: bool = False, orthogonal: bool | int = False, warmup_epochs: int = 0,
                 warmup_noise_multiplier: float = 0.0) -> None:
        self.quantile, self.noise_multiplier, self.clip_norm = quantile, noise_multiplier, clip_norm
        self.centred, self.orthogonal = centred, orthogonal
        self.warmup_epochs, self.warmup_noise_multiplier = warmup_epochs, warmup_noise_multiplier
        self.generator = generator
        self._clipped: list[float] = []
        self._noise_to_signal: list[float] = []

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        norms = torch.linalg.vector_norm(values, dim=1)
        if self.clip_norm is not None:
            bound = torch.tensor(self.clip_norm, dtype=values.dtype)
        else:
            bound = torch.quantile(norms, self.quantile)
        scale = torch.clamp(bound / norms.clamp_min(1e-30), max=1.0)
        out = values * scale.unsqueeze(1)
        noise = torch.randn(values.shape, generator=self.generator, dtype=values.dtype)
        noise = shaped_noise(noise, info, centred=self.centred, orthogonal=self.orthogonal)
        multiplier = self.warmup_noise_multiplier if info.epoch < self.warmup_epochs else self.noise_multiplier
        noise = noise * (multiplier * bound)
        self._clipped.append(float((scale < 1).float().mean()))
        self._noise_to_signal.append(float(noise.norm() / out.norm().clamp_min(1e-30)))
        return out + noise

    def stats(self) -> dict[str, float]:
        if not self._clipped:
            return {}
        n = len(self._clipped)
        return {"clipped_fraction": sum(self._clipped) / n, "noise_to_signal": sum(self._noise_to_signal) / n}


@DEFENSES.register("clip_noise")
class ClipNoise(Defense):
    """Per-example gradient clipping plus Gaussian noise, at the label party.

    Args:
        quantile: clip at this quantile of the batch's per-example gradient norms (1.0: no clipping).
        noise_multiplier: noise standard deviation per coordinate, as a multiple of the clip norm.
        clip_norm: a fixed clip norm instead of the quantile (gives a per-release (ε, δ) statement).
        centred: noise that sums to zero over each batch (see the module; reveals the batch's summed gradient).
        orthogonal: noise orthogonal over each batch to the constant and to the partner's cut activations (see the
            module; implies ``centred`` and reveals also the batch's gradient sums weighted by each activation); a
            whole number K: to the constant and the activations' K leading principal directions only.
        warmup_epochs: the first this many epochs (counted from 0, so a resumed run keeps the schedule) use
            ``warmup_noise_multiplier`` instead of ``noise_multiplier``.
        warmup_noise_multiplier: the noise multiplier of those epochs.

    Example:
        >>> from vsplit.privacy.defenses import make_defense
        >>> make_defense("clip_noise:noise_multiplier=0.3,warmup_epochs=1,warmup_noise_multiplier=0.8").warmup_epochs
        1
    """

    name = "clip_noise"
    side = "label"

    def __init__(self, *, quantile: float = 0.95, noise_multiplier: float = 1.0, clip_norm: float | None = None,
                 centred: bool = False, orthogonal: bool | int = False, warmup_epochs: int = 0,
                 warmup_noise_multiplier: float | None = None):
        super().__init__()
        if not isinstance(warmup_epochs, int) or isinstance(warmup_epochs, bool) or warmup_epochs < 0:
            raise ConfigError(f"clip_noise: warmup_epochs must be a whole number >= 0, got {warmup_epochs!r}")
        if warmup_epochs and (warmup_noise_multiplier is None or warmup_noise_multiplier < 0):
            raise ConfigError("clip_noise: warmup_epochs needs warmup_noise_multiplier >= 0 (the noise of those "
                              "epochs), e.g. clip_noise:warmup_epochs=1,warmup_noise_multiplier=0.8")
        if not warmup_epochs and warmup_noise_multiplier is not None:
            raise ConfigError("clip_noise: warmup_noise_multiplier needs warmup_epochs >= 1 (how many epochs use it)")
        self.warmup_epochs = warmup_epochs
        self.warmup_noise_multiplier = float(warmup_noise_multiplier) if warmup_epochs else noise_multiplier
        if not 0 < quantile <= 1:
            raise ConfigError(f"clip_noise: quantile must be in (0, 1], got {quantile}")
        if noise_multiplier < 0 or (clip_norm is not None and clip_norm <= 0):
            raise ConfigError("clip_noise: noise_multiplier must be >= 0 and clip_norm > 0")
        self.quantile, self.noise_multiplier, self.clip_norm = quantile, noise_multiplier, clip_norm
        self.orthogonal = _orthogonal("clip_noise", orthogonal)
        self.centred = bool(centred) or bool(self.orthogonal)

    @property
    def active(self) -> bool:
        noisy = self.noise_multiplier > 0 or self.warmup_noise_multiplier > 0
        return noisy or self.clip_norm is not None or self.quantile < 1

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        hook = _ClipNoiseHook(
            quantile=self.quantile, noise_multiplier=self.noise_multiplier, clip_norm=self.clip_norm,
            generator=self.generator(seed, "gradients"), centred=self.centred, orthogonal=self.orthogonal,
            warmup_epochs=self.warmup_epochs,
            warmup_noise_multiplier=self.warmup_noise_multiplier,
        )
        self._hooks = [hook]
        return TrainingHooks(gradient_hooks=[hook])

    def guarantee(self, *, n_train: int, batch_size: int, epochs: int, delta: float) -> Guarantee | None:
        least = min(self.noise_multiplier, self.warmup_noise_multiplier) if epochs > self.warmup_epochs \
            else self.warmup_noise_multiplier  # every release at least this noisy: a statement for all of them
        if self.clip_norm is None or least <= 0 or self.centred:
            return None  # centred noise releases the batch's exact sum: no per-example statement covers that
        # a label change moves one clipped gradient by at most 2C: the noise is noise_multiplier / 2 sensitivities
        return gaussian_guarantee(
            noise_multiplier=least / 2, steps=epochs, delta=delta,
            protects="each label, in the gradient of its own example (released once per epoch)",
            scope="not the labels' influence on the top model and so on later gradients of other examples",
        )


class _MaxNormHook:
    def __init__(self, *, generator, centred: bool = False, orthogonal: bool | int = False) -> None:
        self.generator = generator
        self.centred, self.orthogonal = centred, orthogonal
        self._noise_to_signal: list[float] = []

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        squared = (values**2).sum(dim=1)
        std = torch.sqrt((squared.max() - squared).clamp_min(0) / values.shape[1])
        noise = torch.randn(values.shape, generator=self.generator, dtype=values.dtype) * std.unsqueeze(1)
        noise = shaped_noise(noise, info, centred=self.centred, orthogonal=self.orthogonal)
        self._noise_to_signal.append(float(noise.norm() / values.norm().clamp_min(1e-30)))
        return values + noise

    def stats(self) -> dict[str, float]:
        n = len(self._noise_to_signal)
        return {"noise_to_signal": sum(self._noise_to_signal) / n} if n else {}


@DEFENSES.register("max_norm")
class MaxNorm(Defense):
    """Li et al.'s ``max_norm`` heuristic: noise that gives every gradient the batch's largest expected norm.

    Args:
        centred: the noise of each batch summed to zero over it, as ``clip_noise``'s (the norms stay even up to a
            factor ``1 ± 1/batch`` in expected square).
        orthogonal: the noise of each batch orthogonal to the constant and the partner's cut activations (or to
            their K leading principal directions), as ``clip_noise``'s (implies ``centred``).

    Example:
        >>> from vsplit.privacy.defenses import make_defense
        >>> make_defense("max_norm:orthogonal=true").centred
        True
    """

    name = "max_norm"
    side = "label"

    def __init__(self, *, centred: bool = False, orthogonal: bool | int = False) -> None:
        super().__init__()
        self.orthogonal = _orthogonal("max_norm", orthogonal)
        self.centred = bool(centred) or bool(self.orthogonal)

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        hook = _MaxNormHook(generator=self.generator(seed, "gradients"), centred=self.centred,
                            orthogonal=self.orthogonal)
        self._hooks = [hook]
        return TrainingHooks(gradient_hooks=[hook])


__all__ = ["ClipNoise", "MaxNorm"]
