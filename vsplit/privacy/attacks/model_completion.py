"""Model completion by a feature party (Fu et al., "Label Inference Attacks Against Vertical Federated Learning",
USENIX Security 2022): put a small head on its own trained bottom model and fit it with a few known labels.

Theory of operation. Split training shapes the feature party's bottom model so that its embeddings carry what
predicts the label. After training the feature party keeps that model. If it also learns the labels of a few
customers (``n_known``: 40 or 200, say) it can fit a small classifier on its embeddings and score everyone: a label
predictor built on the partner's labels. Part of that predictive power it would have had anyway, from its own
columns and the same few labels; the leak is the *excess*: the AUC of the head on the trained embeddings minus that
of the same head on the party's raw (preprocessed) columns, on test customers. Fu et al.'s attack fine-tunes with
semi-supervised learning (MixMatch); this one fits a plain logistic-regression head on the frozen bottom, and averages
over a few random draws of the known labels.

Example:
    >>> import numpy as np, torch
    >>> rng = np.random.default_rng(0)
    >>> num = torch.from_numpy(rng.normal(size=(1200, 4)).astype(np.float32))
    >>> y = (num[:, :2].sum(1) ** 2 > 2).numpy().astype(int)  # a label raw columns predict only non-linearly
    >>> bottom = lambda cat, num: (num[:, :2].sum(1, keepdim=True) ** 2)  # a bottom that learnt the square
    >>> cat = torch.zeros(1200, 0, dtype=torch.long)
    >>> report = model_completion(bottom, (cat[:800], num[:800]), y[:800], (cat[800:], num[800:]), y[800:], n_known=40)
    >>> report.excess > 0.3
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from threadpoolctl import threadpool_limits

from vsplit.errors import ConfigError
from vsplit.metrics import roc_auc

Inputs = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class CompletionReport:
    """Test AUC of the completed model (``auc``), of the same head on raw columns (``raw_auc``), and the excess."""

    n_known: int
    auc: float
    raw_auc: float

    @property
    def excess(self) -> float:
        return self.auc - self.raw_auc


def _embed(bottom: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], inputs: Inputs) -> np.ndarray:
    if isinstance(bottom, torch.nn.Module):
        bottom.eval()
    with torch.no_grad():
        return bottom(*inputs).double().numpy()


def _raw(inputs: Inputs, encoder: OneHotEncoder | None) -> np.ndarray:
    cat, num = inputs
    parts = [num.double().numpy()]
    if encoder is not None:
        parts.append(encoder.transform(cat.numpy()))
    return np.hstack(parts)


def _known_rows(labels: np.ndarray, n_known: int, rng: np.random.Generator) -> np.ndarray:
    """``n_known`` rows with both classes, in proportion (at least two of the rarer one)."""
    positives, negatives = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    n_pos = min(len(positives), max(2, round(n_known * len(positives) / len(labels))))
    return np.concatenate([rng.choice(positives, n_pos, replace=False), rng.choice(negatives, n_known - n_pos, False)])


def model_completion(
    bottom: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    train_inputs: Inputs,
    train_labels: np.ndarray,
    test_inputs: Inputs,
    test_labels: np.ndarray,
    *,
    n_known: int = 40,
    repeats: int = 5,
    seed: int = 0,
) -> CompletionReport:
    """Fit a logistic head with ``n_known`` known training labels on embeddings and on raw columns; test AUCs.

    Args:
        bottom: the feature party's trained bottom model, called as ``bottom(cat, num)``.
        train_inputs, train_labels: the party's training rows and their true labels (the attacker learns
            ``n_known`` of them).
        test_inputs, test_labels: rows to score, for measurement.
        n_known: labels the attacker knows.
        repeats: random draws of the known labels, averaged.
        seed: seed of the draws.
    """
    train_labels, test_labels = np.asarray(train_labels).astype(int), np.asarray(test_labels).astype(int)
    if not 4 <= n_known <= len(train_labels) or len(np.unique(train_labels)) < 2:
        raise ConfigError(f"n_known must be between 4 and {len(train_labels)} and both classes must occur")
    encoder = None
    if train_inputs[0].shape[1]:
        encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(train_inputs[0].numpy())
    features = {
        "embedding": (_embed(bottom, train_inputs), _embed(bottom, test_inputs)),
        "raw": (_raw(train_inputs, encoder), _raw(test_inputs, encoder)),
    }
    rng = np.random.default_rng(seed)
    aucs: dict[str, list[float]] = {"embedding": [], "raw": []}
    with threadpool_limits(limits=1, user_api="blas"):  # tiny fits: one BLAS thread is fastest
        for _ in range(repeats):
            known = _known_rows(train_labels, n_known, rng)
            for kind, (x_train, x_test) in features.items():
                head = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))
                head.fit(x_train[known], train_labels[known])
                aucs[kind].append(roc_auc(test_labels, head.predict_proba(x_test)[:, 1]))
    return CompletionReport(n_known=n_known, auc=float(np.mean(aucs["embedding"])), raw_auc=float(np.mean(aucs["raw"])))
