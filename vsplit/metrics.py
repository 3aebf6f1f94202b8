"""The metrics finance users expect, from scikit-learn: ROC AUC, KS, accuracy, F1 and log loss.

scikit-learn is imported when a metric is first computed, not with this module: a party process that never scores
(a partner) does not pay for it.

Example:
    >>> import numpy as np
    >>> m = binary_metrics(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> round(m["auc"], 3), round(m["ks"], 3), m["accuracy"]
    (0.75, 0.5, 0.75)
"""

from __future__ import annotations

import math

import numpy as np


def roc_auc(y: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC, or NaN when only one class is present."""
    if len(np.unique(y)) < 2:
        return math.nan
    from sklearn import metrics as skm

    return float(skm.roc_auc_score(y, scores))


def ks_statistic(y: np.ndarray, scores: np.ndarray) -> float:
    """Kolmogorov–Smirnov statistic: the largest gap between the true and false positive rates."""
    if len(np.unique(y)) < 2:
        return math.nan
    from sklearn import metrics as skm

    fpr, tpr, _ = skm.roc_curve(y, scores)
    return float(np.max(tpr - fpr))


def binary_metrics(y: np.ndarray, proba: np.ndarray, *, threshold: float = 0.5) -> dict[str, float]:
    """``auc``, ``ks``, ``accuracy``, ``f1`` and ``log_loss`` of probabilities ``proba`` for labels ``y``."""
    from sklearn import metrics as skm

    y = np.asarray(y).astype(int)
    proba = np.clip(np.asarray(proba, dtype=np.float64), 1e-7, 1 - 1e-7)
    predicted = (proba >= threshold).astype(int)
    return {
        "auc": roc_auc(y, proba),
        "ks": ks_statistic(y, proba),
        "accuracy": float(skm.accuracy_score(y, predicted)),
        "f1": float(skm.f1_score(y, predicted, zero_division=0)),
        "log_loss": float(skm.log_loss(y, proba, labels=[0, 1])),
    }
