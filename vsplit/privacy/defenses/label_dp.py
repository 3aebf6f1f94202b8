"""Label differential privacy by randomized response (as in Ghazi et al., "Deep Learning with Label Differential
Privacy", NeurIPS 2021), at the label party.

Before training, each binary label is kept with probability ``e^ε / (1 + e^ε)`` and flipped otherwise; training
then only ever uses the randomized labels. That is ε-label-DP with δ = 0 for everything derived from them: the
gradients sent, the trained model and its scores (post-processing). Ghazi et al.'s RR-with-prior refines this for
many classes; for two classes it reduces to plain randomized response unless a prior is learnt in stages, which this
defense does not do. SecretFlow's tutorial setting ε = 64 (named ``secretflow_label_dp``) flips with probability
``1 / (1 + e^64)``, about 1.6e-28: no label is ever flipped, and the guarantee is vacuous.

The labels are transformed for every aligned row, validation rows included, because early stopping on true
validation labels would let them shape the released model. One thing stays on true labels: the choice of validation
rows is stratified by them (see :meth:`vsplit.party.LabelParty.make_roles`) and shared in the training plan; set
``validation_fraction=0`` for a strict guarantee.

Example:
    >>> import torch
    >>> rr = RandomizedResponse(epsilon=1.0)
    >>> transform = rr.hooks(feature_parties=["p"], seed=0).label_transform
    >>> noisy = transform(torch.zeros(10_000))
    >>> round(float(noisy.mean()), 2), round(rr.flip_probability, 3)
    (0.27, 0.269)
"""

from __future__ import annotations

import math

import numpy as np
import torch

from vsplit.errors import ConfigError
from vsplit.models.seeds import derive_seed
from vsplit.privacy.accounting import Guarantee
from vsplit.privacy.defenses.base import DEFENSES, Defense
from vsplit.protocol.training.hooks import TrainingHooks


class _RandomizedResponse:
    def __init__(self, *, flip_probability: float, seed: int) -> None:
        self.flip_probability = flip_probability
        self.seed = seed
        self.flipped: float | None = None

    def __call__(self, labels: torch.Tensor) -> torch.Tensor:
        rng = np.random.default_rng(self.seed)
        flip = torch.from_numpy(rng.random(len(labels)) < self.flip_probability)
        self.flipped = float(flip.float().mean()) if len(labels) else 0.0
        return torch.where(flip, 1.0 - labels, labels).to(labels.dtype)

    def stats(self) -> dict[str, float]:
        return {} if self.flipped is None else {"flipped_fraction": self.flipped}


@DEFENSES.register("label_dp")
class RandomizedResponse(Defense):
    """ε-label-DP by randomized response on the training labels.

    Args:
        epsilon: the privacy parameter (``inf`` turns it off).
    """

    name = "label_dp"
    side = "label"

    def __init__(self, *, epsilon: float = 2.0) -> None:
        super().__init__()
        if not epsilon > 0:
            raise ConfigError(f"label_dp: epsilon must be > 0 (inf for off), got {epsilon}")
        self.epsilon = float(epsilon)

    @property
    def flip_probability(self) -> float:
        return 0.0 if math.isinf(self.epsilon) else 1.0 / (1.0 + math.exp(self.epsilon))

    @property
    def active(self) -> bool:
        return math.isfinite(self.epsilon)

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        transform = _RandomizedResponse(
            flip_probability=self.flip_probability, seed=derive_seed(seed, "defense", self.name)
        )
        self._hooks = [transform]
        return TrainingHooks(label_transform=transform)

    def guarantee(self, *, n_train: int, batch_size: int, epochs: int, delta: float) -> Guarantee | None:
        return Guarantee(
            epsilon=self.epsilon, delta=0.0, formal=True,
            protects="each training label, in everything derived from it: gradients, model and scores",
            scope="the validation split is stratified by the true labels (use validation_fraction=0 to avoid it)",
        )
