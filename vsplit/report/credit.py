"""Credit-risk figures of a scored test set: Gini, base rate, score bands, lift and capture, thresholds, intervals.

Theory of operation. Everything here is a pure function of the labels ``y`` (1 = event, e.g. a default or a
subscription) and the scores ``proba`` of the same rows, highest score = most likely event. Score bands (deciles)
rank the customers by score and cut them into ``bands`` groups of (near) equal size, band 1 holding the highest
scores; ties are broken by row order, so the bands always sum to the rows and the events. The bootstrap draws rows
with replacement (a seeded generator) and recomputes AUC, and, given a second model's scores of the same rows, the
gain of one over the other on the same draw (a paired bootstrap), reporting the 2.5 and 97.5 percentiles.

Example:
    >>> import numpy as np
    >>> y = np.array([0, 0, 0, 1, 0, 1, 0, 1, 1, 1])
    >>> p = np.linspace(0.05, 0.95, 10)
    >>> bands = score_bands(y, p, bands=5)
    >>> [b["events"] for b in bands], sum(b["count"] for b in bands)
    ([2, 1, 1, 1, 0], 10)
    >>> round(gini(0.75), 2)
    0.5
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from vsplit.metrics import ks_statistic, roc_auc

#: The score thresholds of the threshold table: the share of customers declined, highest scores first.
DECLINE_SHARES = (0.05, 0.10, 0.20, 0.30, 0.50)


def gini(auc: float) -> float:
    """The Gini coefficient (accuracy ratio) of a model with ROC AUC ``auc``: ``2 * auc - 1``."""
    return 2.0 * auc - 1.0


def _ranked(y: np.ndarray, proba: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores sorted by score, highest first (ties keep row order)."""
    y = np.asarray(y).astype(int)
    proba = np.asarray(proba, dtype=np.float64)
    order = np.argsort(-proba, kind="stable")
    return y[order], proba[order]


def score_bands(y: np.ndarray, proba: np.ndarray, *, bands: int = 10) -> list[dict[str, Any]]:
    """The score-band table: per band (1 = highest scores) its count, events, event rate, score range, the
    cumulative share of all events captured down to it, and its lift (event rate over the base rate)."""
    ys, ps = _ranked(y, proba)
    total_events = max(1, int(ys.sum()))
    base = float(ys.mean()) if len(ys) else math.nan
    rows, captured = [], 0
    for band, idx in enumerate(np.array_split(np.arange(len(ys)), bands), start=1):
        if len(idx) == 0:
            continue
        events = int(ys[idx].sum())
        captured += events
        rate = events / len(idx)
        rows.append({"band": band, "count": len(idx), "events": events, "event_rate": rate,
                     "min_score": float(ps[idx].min()), "max_score": float(ps[idx].max()),
                     "cum_capture": captured / total_events, "lift": rate / base if base else math.nan})
    return rows


def capture_curve(y: np.ndarray, proba: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(share of customers, share of events captured, cumulative lift)``, highest scores first."""
    ys, _ = _ranked(y, proba)
    share = np.arange(1, len(ys) + 1) / max(1, len(ys))
    captured = np.cumsum(ys) / max(1, int(ys.sum()))
    base = ys.mean() if len(ys) else math.nan
    lift = (np.cumsum(ys) / np.arange(1, len(ys) + 1)) / base if base else np.full(len(ys), math.nan)
    return share, captured, lift


def threshold_table(y: np.ndarray, proba: np.ndarray, *,
                    decline_shares: tuple[float, ...] = DECLINE_SHARES) -> list[dict[str, Any]]:
    """Per cut-off (decline the given share of customers with the highest scores): the score threshold, approval
    rate, bad rate among the approved, and precision and recall of the declined as a prediction of the event."""
    ys, ps = _ranked(y, proba)
    n, events = len(ys), int(ys.sum())
    table = []
    for share in decline_shares:
        k = round(share * n)
        if k < 1 or k >= n:
            continue
        declined, approved = ys[:k], ys[k:]
        caught = int(declined.sum())
        table.append({"decline_share": share, "threshold": float(ps[k - 1]), "approval_rate": (n - k) / n,
                      "bad_rate": float(approved.mean()), "precision": caught / k,
                      "recall": caught / events if events else math.nan})
    return table


class _RankedScores:
    """Labels and scores sorted once, so that the ROC AUC of any reweighting of the rows (a bootstrap resample: each
    row's weight is how often it was drawn) costs two ``bincount``: the Mann-Whitney statistic, ties counting half,
    which is the area :func:`vsplit.metrics.roc_auc` (scikit-learn's trapezoids) computes.

    >>> import numpy as np
    >>> y, p = np.array([0, 1, 0, 1, 1]), np.array([0.1, 0.4, 0.4, 0.8, 0.2])
    >>> ranked = _RankedScores(y, p)
    >>> ranked.auc(np.ones(5)) == roc_auc(y, p)
    True
    >>> ranked.auc(np.array([2.0, 0, 1, 1, 0])) == roc_auc(np.array([0, 0, 0, 1]), np.array([.1, .1, .4, .8]))
    True
    """

    def __init__(self, y: np.ndarray, scores: np.ndarray) -> None:
        _, self.group = np.unique(scores, return_inverse=True)  # tied scores share a group, in score order
        self.groups = int(self.group.max()) + 1 if len(scores) else 0
        self.positive = np.asarray(y) == 1

    def auc(self, weights: np.ndarray) -> float:
        """The AUC with row ``i`` counted ``weights[i]`` times; NaN when one class has no weight."""
        pos = np.bincount(self.group, weights=np.where(self.positive, weights, 0.0), minlength=self.groups)
        neg = np.bincount(self.group, weights=np.where(self.positive, 0.0, weights), minlength=self.groups)
        total_pos, total_neg = pos.sum(), neg.sum()
        if total_pos == 0 or total_neg == 0:
            return math.nan
        below = np.cumsum(neg) - neg  # negatives scored strictly below each group
        return float(np.dot(pos, below + 0.5 * neg) / (total_pos * total_neg))


def bootstrap_intervals(y: np.ndarray, proba: np.ndarray, *, baseline: np.ndarray | None = None,
                        draws: int = 200, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Bootstrap intervals (``level``, percentile method, ``draws`` resamples of the rows, seeded) of the AUC and,
    with ``baseline`` scores of the same rows, of the AUC gain over the baseline (a paired bootstrap).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0); y = rng.integers(0, 2, 300); p = y * 0.3 + rng.random(300)
    >>> out = bootstrap_intervals(y, p, baseline=rng.random(300), draws=50)
    >>> out["auc"][0] < roc_auc(y, p) < out["auc"][1], out["draws"]
    (True, 50)
    """
    y = np.asarray(y).astype(int)
    proba = np.asarray(proba, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ranked = _RankedScores(y, proba)
    other = None if baseline is None else _RankedScores(y, np.asarray(baseline, dtype=np.float64))
    aucs, gains = [], []
    for _ in range(draws):
        pick = rng.integers(0, len(y), len(y))
        weights = np.bincount(pick, minlength=len(y)).astype(np.float64)  # how often each row was drawn
        auc = ranked.auc(weights)
        if math.isnan(auc):  # a resample with one class only
            continue
        aucs.append(auc)
        if other is not None:
            gains.append(auc - other.auc(weights))
    tail = (1.0 - level) / 2 * 100

    def interval(values: list[float]) -> list[float] | None:
        return [float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))] if values else None

    out: dict[str, Any] = {"level": level, "draws": len(aucs), "seed": seed, "auc": interval(aucs)}
    if baseline is not None:
        out["gain"] = interval(gains)
        out["gain_point"] = roc_auc(y, proba) - roc_auc(y, np.asarray(baseline, dtype=np.float64))
    return out


def credit_summary(y: np.ndarray, proba: np.ndarray, *, baseline: np.ndarray | None = None, bands: int = 10,
                   draws: int = 200, seed: int = 0) -> dict[str, Any]:
    """Every credit-risk figure of one scored test set, as the report stores it (``report.json``'s ``credit``)."""
    y = np.asarray(y).astype(int)
    auc = roc_auc(y, proba)
    return {"rows": len(y), "events": int(y.sum()), "base_rate": float(y.mean()) if len(y) else math.nan,
            "auc": auc, "gini": gini(auc), "ks": ks_statistic(y, proba),
            "bands": score_bands(y, proba, bands=bands), "thresholds": threshold_table(y, proba),
            "bootstrap": bootstrap_intervals(y, proba, baseline=baseline, draws=draws, seed=seed)}
