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
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 300); a = y + rng.normal(size=300); b = y + rng.normal(size=300)
    >>> one_se_weight(y, a, b, weights=(0.0, 0.25, 0.5, 0.75, 1.0), seed=0)  # two parts as good: the blend
    0.5
    >>> one_se_weight(y, a, rng.normal(size=300), weights=(0.0, 0.5, 1.0), seed=0)  # useless trees: off 0.5
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["bootstrap_aucs", "one_se_weight", "resample_counts"]


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


def one_se_weight(y: np.ndarray, networks: np.ndarray, trees: np.ndarray, *, weights: Sequence[float],
                  resamples: int = 200, seed: int = 0) -> float:
    """The weight of ``weights`` nearest 0.5 whose combination ``w * networks + (1 - w) * trees`` has an AUC on ``y``
    within one standard error of the best weight's (paired bootstrap of the rows, ``resamples`` seeded by ``seed``);
    ties go to the better AUC."""
    from sklearn.metrics import roc_auc_score

    combos = {float(w): w * np.asarray(networks) + (1 - w) * np.asarray(trees) for w in weights}
    auc = {w: float(roc_auc_score(y, s)) for w, s in combos.items()}
    best = max(auc, key=lambda w: (round(auc[w], 12), -abs(w - 0.5)))
    counts = resample_counts(len(y), resamples, seed=seed)
    boot = {w: bootstrap_aucs(y, s, counts) for w, s in combos.items()}
    close = [w for w in auc if auc[best] - auc[w] <= np.nanstd(boot[best] - boot[w], ddof=1)]
    return min(close, key=lambda w: (abs(w - 0.5), -auc[w]))
