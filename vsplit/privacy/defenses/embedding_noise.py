"""Feature-party defense on the embeddings it sends: clip each row's embedding, then add Gaussian noise.

Each embedding is scaled down to an L2 norm of at most ``clip`` and, in training, ``N(0, (noise_multiplier ·
clip)²)`` is added to every coordinate. Clipping also applies to validation and scoring embeddings, so the top model
sees the same scale it was trained on; noise is added there only with ``noise_at_scoring=True``. SecretFlow's
split-learning tutorial uses ``noise_multiplier=0.5, clip=1.0`` (named setting ``secretflow_embedding_dp``).

The (ε, δ) reported accounts each row's own embeddings, released once per epoch: a row's features can move its
clipped embedding by at most ``2 · clip`` (replacement), so each release is a Gaussian mechanism of noise multiplier
``noise_multiplier / 2``. It does not cover what the row's features do to the bottom model's weights, and so to the
embeddings of other rows, nor un-noised validation and scoring embeddings.

Example:
    >>> import torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> hook = EmbeddingNoise(noise_multiplier=0.0, clip=1.0).hooks(feature_parties=["p"], seed=0).embedding_hooks
    >>> hook["p"][0](torch.tensor([[3.0, 4.0]]), StepInfo(party="p", epoch=0, step=0, rows=None)).tolist()
    [[0.6000000238418579, 0.800000011920929]]
"""

from __future__ import annotations

import math

import torch

from vsplit.errors import ConfigError
from vsplit.privacy.accounting import Guarantee, gaussian_guarantee
from vsplit.privacy.defenses.base import DEFENSES, Defense
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks


class _EmbeddingNoiseHook:
    def __init__(self, *, noise_multiplier: float, clip: float, noise_at_scoring: bool, generator) -> None:
        self.noise_multiplier, self.clip, self.noise_at_scoring = noise_multiplier, clip, noise_at_scoring
        self.generator = generator
        self._clipped: list[float] = []
        self._noise_to_signal: list[float] = []

    def __call__(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        out = values
        if math.isfinite(self.clip):
            norms = torch.linalg.vector_norm(values, dim=1, keepdim=True)
            scale = torch.clamp(self.clip / norms.clamp_min(1e-30), max=1.0)
            out = values * scale
            if info.training:
                self._clipped.append(float((scale < 1).float().mean()))
        if self.noise_multiplier > 0 and (info.training or self.noise_at_scoring):
            std = self.noise_multiplier * (self.clip if math.isfinite(self.clip) else 1.0)
            noise = torch.randn(values.shape, generator=self.generator, dtype=values.dtype) * std
            if info.training:
                self._noise_to_signal.append(float(noise.norm() / out.detach().norm().clamp_min(1e-30)))
            out = out + noise
        return out

    def stats(self) -> dict[str, float]:
        out = {}
        if self._clipped:
            out["clipped_fraction"] = sum(self._clipped) / len(self._clipped)
        if self._noise_to_signal:
            out["noise_to_signal"] = sum(self._noise_to_signal) / len(self._noise_to_signal)
        return out


@DEFENSES.register("embedding_noise")
class EmbeddingNoise(Defense):
    """Clipped Gaussian noise on every feature party's embeddings.

    Args:
        noise_multiplier: noise standard deviation per coordinate, as a multiple of ``clip``.
        clip: largest L2 norm of an embedding (``inf``: no clipping; the noise is then ``noise_multiplier``).
        noise_at_scoring: add noise to validation and scoring embeddings too (costs accuracy at scoring).
    """

    name = "embedding_noise"
    side = "feature"

    def __init__(self, *, noise_multiplier: float = 0.1, clip: float = 3.0, noise_at_scoring: bool = False) -> None:
        super().__init__()
        if noise_multiplier < 0 or clip <= 0:
            raise ConfigError("embedding_noise: noise_multiplier must be >= 0 and clip > 0 (inf for no clipping)")
        self.noise_multiplier, self.clip, self.noise_at_scoring = noise_multiplier, clip, noise_at_scoring

    @property
    def active(self) -> bool:
        return self.noise_multiplier > 0 or math.isfinite(self.clip)

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        hooks = {
            party: _EmbeddingNoiseHook(
                noise_multiplier=self.noise_multiplier, clip=self.clip, noise_at_scoring=self.noise_at_scoring,
                generator=self.generator(seed, "embeddings", party),
            )
            for party in feature_parties
        }
        self._hooks = list(hooks.values())
        return TrainingHooks(embedding_hooks={party: [hook] for party, hook in hooks.items()})

    def guarantee(self, *, n_train: int, batch_size: int, epochs: int, delta: float) -> Guarantee | None:
        if self.noise_multiplier <= 0 or not math.isfinite(self.clip):
            return None
        return gaussian_guarantee(
            noise_multiplier=self.noise_multiplier / 2, steps=epochs, delta=delta,
            protects="each row's features, in its own training embeddings (released once per epoch)",
            scope="not the features' effect on the bottom model's weights (so on other rows' embeddings), nor "
            "validation and scoring embeddings unless noise_at_scoring",
        )
