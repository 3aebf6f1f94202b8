"""A SplitOut-style detector (after Erdogan, Küpçü and Çiçek, "SplitOut: Out-of-the-Box Training-Hijacking
Detection in Split Learning via Outlier Detection", CANS 2024): an outlier detector fitted on the client's own honest
gradients from a short local warm-up.

Theory of operation. Before training, the client simulates honest training on its own labelled rows: copies of its
initial model, each with a *surrogate* of the server's layers (it does not know the real ones, so several plausible
ones: MLPs of a few widths, trained at two learning rates), trained locally for a few epochs. It records, per batch,
two features of the gradients at the cut that do not depend on the scale of the server's layers: the mean cosine
similarity of same-label gradient pairs and that of different-label pairs. A local outlier factor (scikit-learn's
``LocalOutlierFactor(novelty=True)``) is fitted on those honest features. In training, each received batch is scored;
the detector fires when ``patience`` consecutive batches are outliers. SplitOut itself fits the outlier detector on
the gradients; features are used here because a surrogate's weights are not the server's, so raw gradients would
differ even under an honest server. Canary rows (SplitGuard) are left out when known.

Example:
    >>> import numpy as np, torch
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> labels = np.array([0, 1] * 16)
    >>> g = torch.Generator().manual_seed(0)
    >>> def honest():
    ...     return torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])[labels] + 0.3 * torch.randn(32, 3, generator=g)
    >>> d = SplitOut(patience=2, stop=False).bind(labels=labels)
    >>> _ = d.fit([gradient_features(honest(), labels) for _ in range(40)])
    >>> for step in range(4):
    ...     d(honest() if step < 2 else torch.ones(32, 3), StepInfo(party="c", epoch=0, step=step, rows=np.arange(32)))
    >>> d.first.step
    3
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.models.segments import MLP
from vsplit.privacy.detectors.base import DETECTORS, Detector
from vsplit.privacy.detectors.scrutinizer import similarity_gap

FEATURES = ("same_label_cosine", "different_label_cosine")


def gradient_features(grads: torch.Tensor, labels: np.ndarray) -> np.ndarray | None:
    """The batch's features (:data:`FEATURES`), or None if it has no pairs of both kinds."""
    found = similarity_gap(grads.double(), labels)
    return None if found is None else np.array(found)


def default_surrogates(width: int, n_classes: int, *, seed: int = 0) -> list[nn.Module]:
    """Stand-ins for unknown server layers: MLPs from the cut's ``width`` with no, one or two hidden layers."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [MLP(width, hidden=h, out_dim=n_classes) for h in ((), (32,), (64,), (128, 64))]


@DETECTORS.register("splitout")
class SplitOut(Detector):
    """Fires when ``patience`` consecutive gradient batches are outliers against the warm-up's honest ones.

    Args:
        patience: consecutive outlier batches needed to fire.
        neighbors: neighbours of the local outlier factor.
        stop: raise on detection (default) or only record.
    """

    name = "splitout"

    def __init__(self, *, patience: int = 3, neighbors: int = 20, stop: bool = True) -> None:
        super().__init__(stop=stop)
        if patience < 1 or neighbors < 1:
            raise ConfigError("splitout: patience and neighbors must be >= 1")
        self.patience, self.neighbors = patience, neighbors
        self.model_: object | None = None
        self.scale_: tuple[np.ndarray, np.ndarray] | None = None
        self._run = 0

    def fit(self, features: Sequence[np.ndarray | None]) -> SplitOut:
        """Fit the outlier detector on honest per-batch features (from :meth:`warm_up`, or your own)."""
        from sklearn.neighbors import LocalOutlierFactor

        x = np.array([f for f in features if f is not None])
        if len(x) < 5:
            raise ConfigError(f"splitout: need at least 5 honest batches to fit on, got {len(x)}")
        mean, sd = x.mean(0), x.std(0)
        self.scale_ = (mean, np.where(sd > 1e-9, sd, 1e-9))
        self.model_ = LocalOutlierFactor(n_neighbors=min(self.neighbors, len(x) - 1), novelty=True)
        self.model_.fit((x - mean) / self.scale_[1])  # type: ignore[attr-defined]
        return self

    def warm_up(
        self,
        model: nn.Module,
        inputs: Sequence[torch.Tensor],
        labels: np.ndarray,
        *,
        surrogates: Sequence[nn.Module],
        learning_rates: Sequence[float] = (1e-3, 3e-3),
        epochs: int = 4,
        batch_size: int = 64,
        seed: int = 0,
    ) -> SplitOut:
        """Train a copy of ``model`` (the client's layers, as they start) with each surrogate of the server's layers
        (e.g. :func:`default_surrogates`) at each learning rate, on the client's own ``inputs`` and ``labels``, for
        ``epochs``; fit on the features of every batch's gradients at the cut.

        Everything is deep-copied (the client's model is not changed) and runs under its own torch random stream, so
        the training run that follows is the same with or without a warm-up.
        """
        labels = np.array(labels)
        target = torch.from_numpy(labels).long()
        features = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for surrogate in surrogates:
                for lr in learning_rates:
                    local, server = copy.deepcopy(model).train(), copy.deepcopy(surrogate).train()
                    opt = torch.optim.Adam([*local.parameters(), *server.parameters()], lr=lr)
                    for _ in range(epochs):
                        order = torch.randperm(len(labels))
                        for start in range(0, len(order), batch_size):
                            idx = order[start : start + batch_size]
                            z = local(*(t[idx] for t in inputs))
                            leaf = z.detach().requires_grad_(True)
                            loss = nn.functional.cross_entropy(server(leaf), target[idx])
                            opt.zero_grad()
                            loss.backward()
                            assert leaf.grad is not None
                            features.append(gradient_features(leaf.grad, labels[idx.numpy()]))
                            z.backward(leaf.grad)
                            opt.step()
        return self.fit(features)

    def statistic(self, grads: torch.Tensor, rows: np.ndarray) -> tuple[float, dict[str, float]] | None:
        assert self.labels is not None
        if self.model_ is None or self.scale_ is None:
            raise ConfigError("splitout: fit it first (warm_up(...) on the client's own data, or fit(features))")
        keep = np.ones(len(rows), dtype=bool) if self.canaries is None else ~self.canaries[rows]
        features = gradient_features(grads[torch.from_numpy(keep)], self.labels[rows[keep]])
        if features is None:
            return None
        scaled = ((features - self.scale_[0]) / self.scale_[1])[None]
        score = float(self.model_.score_samples(scaled)[0])  # type: ignore[attr-defined]
        outlier = bool(self.model_.predict(scaled)[0] == -1)  # type: ignore[attr-defined]
        self._run = self._run + 1 if outlier else 0
        return score, {**dict(zip(FEATURES, features.tolist(), strict=True)), "outlier": float(outlier)}

    def judge(self) -> tuple[float, float, str] | None:
        if self._run < self.patience:
            return None
        last = self.history[-1]
        offset = float(self.model_.offset_)  # type: ignore[attr-defined]
        return last.value, offset, (
            f"{self.patience} batches in a row are outliers against the client's honest warm-up gradients (local "
            f"outlier score {last.value:.2f}, threshold {offset:.2f}; same-label cosine "
            f"{last.extra['same_label_cosine']:.3f}, different-label {last.extra['different_label_cosine']:.3f})"
        )
