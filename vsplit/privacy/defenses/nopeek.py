"""NoPeek (Vepakomma et al., 2020): a feature party penalises the distance correlation of its inputs and embeddings.

Theory of operation. Distance correlation (Székely et al.) is zero only when two random vectors are independent,
and it catches non-linear dependence. Each training step the feature party adds ``weight · dCor(X, Z)`` of the
batch's inputs ``X`` (numeric columns and one-hot categories) and embeddings ``Z`` to its own loss, as a
:class:`~vsplit.protocol.training.hooks.LocalLoss`: its bottom model learns embeddings that keep what the label
needs and as little else as it can, which makes inverting them harder. Nothing changes on the wire or at the label
party, and there is no (ε, δ) statement: it is an empirical defense, measured by the reconstruction attack.

Example:
    >>> import torch
    >>> x = torch.randn(64, 3)
    >>> round(float(distance_correlation(x, 2 * x + 1)), 3)
    1.0
    >>> float(distance_correlation(x, torch.randn(64, 3))) < 0.5
    True
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from vsplit.errors import ConfigError
from vsplit.privacy.defenses.base import DEFENSES, Defense
from vsplit.protocol.training.hooks import TrainingHooks


def _centred_distances(x: torch.Tensor) -> torch.Tensor:
    diff = x.unsqueeze(0) - x.unsqueeze(1)
    d = torch.sqrt((diff**2).sum(-1) + 1e-12)  # the epsilon keeps the gradient finite at d = 0
    return d - d.mean(0, keepdim=True) - d.mean(1, keepdim=True) + d.mean()


def distance_correlation(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Sample distance correlation of the rows of ``x`` and ``z`` (in [0, 1], differentiable)."""
    a, b = _centred_distances(x.double()), _centred_distances(z.double())
    cov = (a * b).mean()
    var = torch.sqrt((a * a).mean() * (b * b).mean())
    return torch.sqrt(torch.clamp(cov / var.clamp_min(1e-30), min=1e-12)).to(z.dtype)


def flat_inputs(inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """A bottom model's ``(cat, num)`` inputs as one float matrix: numeric columns, then one-hot categories."""
    cat, num = inputs
    parts = [num.float()] + [F.one_hot(cat[:, j]).float() for j in range(cat.shape[1])]
    return torch.cat(parts, dim=1)


class _NoPeekLoss:
    def __init__(self, *, weight: float) -> None:
        self.weight = weight
        self._dcor: list[float] = []

    def __call__(self, inputs: tuple[torch.Tensor, torch.Tensor], embeddings: torch.Tensor) -> torch.Tensor:
        dcor = distance_correlation(flat_inputs(inputs), embeddings)
        self._dcor.append(float(dcor.detach()))
        return self.weight * dcor

    def stats(self) -> dict[str, float]:
        return {"distance_correlation": sum(self._dcor) / len(self._dcor)} if self._dcor else {}


@DEFENSES.register("nopeek")
class NoPeek(Defense):
    """The NoPeek distance-correlation penalty on every feature party's embeddings.

    Args:
        weight: the penalty's weight against the task loss (the paper's α); 0 turns it off.
    """

    name = "nopeek"
    side = "feature"

    def __init__(self, *, weight: float = 0.7) -> None:
        super().__init__()
        if weight < 0:
            raise ConfigError(f"nopeek: weight must be >= 0, got {weight}")
        self.weight = weight

    @property
    def active(self) -> bool:
        return self.weight > 0

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        losses = {party: _NoPeekLoss(weight=self.weight) for party in feature_parties}
        self._hooks = list(losses.values())
        return TrainingHooks(local_losses=losses)
