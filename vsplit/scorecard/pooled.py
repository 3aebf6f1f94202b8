"""The oracle: the scorecard's optimiser on the pooled WOE matrix, in one place (what no deployment can build).

Example:
    >>> import numpy as np
    >>> x = np.array([[0.5], [-0.5], [0.5], [-0.5]])
    >>> coef, intercept = fit_pooled(x, np.array([1, 0, 1, 1]), params=ScorecardParams(iterations=5))
    >>> bool(coef[0] > 0), round(intercept, 3) > 0
    (True, True)
"""

from __future__ import annotations

import numpy as np

from vsplit.errors import DataError
from vsplit.scorecard.params import ScorecardParams, momentum


def sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function, without overflow warnings."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


def start_intercept(labels: np.ndarray) -> float:
    """The intercept before the first step: the training rows' log-odds.

    Raises:
        DataError: the labels are not 0/1 or hold one class only.
    """
    y = np.asarray(labels, dtype=np.float64)
    if not len(y) or not np.isin(y, (0.0, 1.0)).all():
        raise DataError("scorecard: labels must be 0/1; set data.positive_label for a label of other values")
    rate = float(y.mean())
    if not 0 < rate < 1:
        raise DataError("scorecard: the training labels hold one class only; a scorecard needs both")
    return float(np.log(rate / (1 - rate)))


def fit_pooled(woe: np.ndarray, labels: np.ndarray, *, params: ScorecardParams) -> tuple[np.ndarray, float]:
    """Coefficients (one per column of ``woe``) and intercept, after ``params.iterations`` Nesterov steps."""
    x = np.asarray(woe, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(y):
        raise DataError(f"scorecard: a WOE matrix of shape {x.shape} for {len(y)} labels")
    n = len(y)
    w, b = np.zeros(x.shape[1]), start_intercept(y)
    prev_w, prev_b = w, b
    for step in range(params.iterations):
        m = momentum(step)
        look_w, look_b = w + m * (w - prev_w), b + m * (b - prev_b)
        d = sigmoid(x @ look_w + look_b) - y
        prev_w, prev_b = w, b
        w = look_w - params.learning_rate * (x.T @ d / n + params.l2 * look_w)
        b = look_b - params.learning_rate * float(d.mean())
    return w, float(b)
