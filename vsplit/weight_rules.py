"""How sure the set-aside rows are of an ensemble's weight: paired bootstrap AUCs and the one-standard-error rule.

An ensemble's weight is chosen on a few hundred to a few thousand set-aside rows (:mod:`vsplit.ensemble`). The weight
of the best AUC there is noisy: on 360 rows, weights far apart often differ by less than the rows can tell. The
*one-standard-error* rule (Breiman's, for model selection) keeps the weight nearest the equal blend 0.5 among those
whose AUC is within one standard error of the best one's, the standard error of the *difference* of the two AUCs over
paired bootstrap resamples of the rows (both weights scored on the same resample): it moves off 0.5 only as far as the
rows show the blend worse.

:func:`bootstrap_aucs` computes every resample's AUC at once from counts (a resample is a row's multiplicity), ties
counted one half, as :func:`sklearn.metrics.roc_auc_score` with ``sample_weight`` does.

Example:
    >>> import numpy as np
    >>> from sklearn.metrics import roc_auc_score
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 300); a = y + rng.normal(size=300); b = y + rng.normal(size=300)
    >>> grid = (0.0, 0.25, 0.5, 0.75, 1.0)
    >>> one_se_weight(y, a, b, {w: roc_auc_score(y, w * a + (1 - w) * b) for w in grid}, seed=0)  # as good: the blend
    0.5
    >>> noise = rng.normal(size=300)
    >>> one_se_weight(y, a, noise, {w: roc_auc_score(y, w * a + (1 - w) * noise) for w in grid}, seed=0)  # useless
    1.0
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["WEIGHT_RULES", "best_weight", "bootstrap_aucs", "one_se_weight", "resample_counts"]

#: how an ensemble's weight is chosen on the set-aside rows (:func:`vsplit.ensemble.choose_weight`)
WEIGHT_RULES = ("best", "one_se")


def best_weight(aucs: Mapping[float, float]) -> float:
    """The weight of the best AUC in ``aucs`` (weight -> AUC); ties go to the weight nearest 0.5.

    Example:
        >>> best_weight({0.25: 0.8, 0.5: 0.8, 1.0: 0.7})
        0.5
    """
    return max(aucs, key=lambda w: (round(aucs[w], 12), -abs(w - 0.5)))


def resample_counts(rows: int, resamples: int, *, seed: int) -> np.ndarray:
    """``(resamples, rows)`` multiplicities of a bootstrap: each resample draws ``rows`` rows with replacement.

    Example:
        >>> resample_counts(5, 2, seed=0).sum(axis=1).tolist()
        [5, 5]
    """
    return np.random.default_rng(seed).multinomial(rows, np.full(rows, 1 / rows), size=resamples)


def bootstrap_aucs(y: np.ndarray, scores: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The AUC of ``scores`` on each resample (a row of ``counts``); NaN where a resample has one class only.

    Example:
        >>> bootstrap_aucs(np.array([0, 1, 1]), np.array([0.1, 0.2, 0.2]), np.array([[1, 1, 1], [1, 0, 2]])).tolist()
        [1.0, 1.0]
    """
    y = np.asarray(y).astype(bool)
    order = np.argsort(scores, kind="stable")
    s, positive = np.asarray(scores)[order], y[order]
    c = np.asarray(counts, dtype=np.float64)[:, order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])  # groups of tied scores
    pos = np.add.reduceat(c * positive, starts, axis=1)
    neg = np.add.reduceat(c * ~positive, starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg  # negatives scored strictly lower than each group
    wins = (pos * (below + 0.5 * neg)).sum(axis=1)
    total = pos.sum(axis=1) * neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, wins / total, np.nan)


def one_se_weight(y: np.ndarray, networks: np.ndarray, trees: np.ndarray, aucs: Mapping[float, float], *,
                  resamples: int = 200, seed: int = 0) -> float:
    """The weight of ``aucs`` (weight -> AUC of ``w * networks + (1 - w) * trees`` on ``y``) nearest 0.5 whose AUC is
    within one standard error of the best weight's (paired bootstrap of the rows, ``resamples`` seeded by ``seed``);
    ties go to the better AUC."""
    best = best_weight(aucs)
    counts = resample_counts(len(y), resamples, seed=seed)
    networks, trees = np.asarray(networks), np.asarray(trees)
    boot = {w: bootstrap_aucs(y, w * networks + (1 - w) * trees, counts) for w in aucs}
    close = [w for w in aucs if aucs[best] - aucs[w] <= np.nanstd(boot[best] - boot[w], ddof=1)]
    return min(close, key=lambda w: (abs(w - 0.5), -aucs[w]))
