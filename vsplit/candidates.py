"""The split's model on a small table: the split network blended with the split scorecard.

Theory of operation. On a table of a few thousand customers a network has little to learn from, and a scorecard
(logistic regression on WOE-binned attributes, :class:`~vsplit.scorecard_estimator.SplitScorecard`) often ranks
better; the two err on different customers. With ``SplitClassifier(candidates="network+scorecard")`` the label party
also trains the split scorecard on the same views and scores a customer with the mean of the two models' log-odds
(:data:`WEIGHT` each): both are split models, so nothing crosses the cut that either would not send alone, and the
label party combines their outputs locally. On 1,000-row samples of ``bank_marketing_no_duration`` the split
network alone stays 0.05 AUC below a pooled logistic regression of the same columns, the blend does not
(``benchmarks/small_tables.py``, docs/models.md "Small tables").

Why a fixed equal weight and not one chosen on validation rows: on such tables a tenth of the rows holds a dozen
positives, the network's validation AUC is the best of its epochs on those very rows (it chose the epoch there), and
a choice made on them picked the network on four seeds in five, and on three of those it then lost to the scorecard
by 0.03 to 0.14 on the test rows;
three-fold cross-validation of both models still chose the network on one seed in five where it lost by 0.05, at
six to eight times the training time.

``candidates="network+scorecard"`` needs a binary label, the vertical topology, ``mode="split"`` and the ``he``
extra (sf-heu); training then takes the scorecard's time too (26 s for 1,000 customers with 2048-bit keys, measured
at load 7 on 2 cores). The estimator's ``scorecard_`` holds the scorecard (``None`` with ``candidates="network"``,
the default), and ``predict_proba``, ``evaluate`` and ``score`` use the blend.

Example:
    >>> check_candidates("network+scorecard")
    'network+scorecard'
    >>> float(blend(np.array([0.2]), np.array([0.8]))[0])
    0.5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from vsplit.errors import ConfigError

__all__ = ["CHOICES", "WEIGHT", "blend", "check_candidates", "fit_candidates"]

#: ``candidates``: the network alone, or the network blended with the scorecard
NETWORK, BLEND = "network", "network+scorecard"
CHOICES = (NETWORK, BLEND)
#: the network's weight in the blend of log-odds (the scorecard gets ``1 - WEIGHT``)
WEIGHT = 0.5


def check_candidates(value: str) -> str:
    """``value`` if it is one of :data:`CHOICES`, else a :class:`~vsplit.errors.ConfigError` naming them."""
    if value not in CHOICES:
        raise ConfigError(f"candidates must be one of {CHOICES}, got {value!r}")
    return value


def blend(network: np.ndarray, scorecard: np.ndarray, *, weight: float = WEIGHT) -> np.ndarray:
    """The probability of ``weight`` times the network's log-odds plus ``1 - weight`` times the scorecard's; a row
    one model did not score (NaN) keeps the other's."""
    def log_odds(p: np.ndarray) -> np.ndarray:
        p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
        return np.log(p) - np.log1p(-p)

    z = weight * log_odds(network) + (1 - weight) * log_odds(scorecard)
    out = 1 / (1 + np.exp(-z))
    return np.where(np.isnan(network), scorecard, np.where(np.isnan(scorecard), network, out))


def fit_candidates(est: Any, views: Mapping[str, pd.DataFrame]) -> None:
    """After ``est`` (a :class:`~vsplit.estimator.SplitClassifier`) trained its network: with
    ``candidates="network+scorecard"``, train the split scorecard on ``views`` too (``scorecard_``)."""
    est.scorecard_ = None
    if est.candidates == NETWORK:
        return
    if why := _not_applicable(est):
        raise ConfigError(f"candidates={est.candidates!r}: {why}; or leave candidates='network'")
    est.scorecard_ = _scorecard(est).fit(views)


def _not_applicable(est: Any) -> str | None:
    from vsplit.he._lib import heu_available

    if est.mode != "split" or est.topology != "vertical" or est.label_party_.task.name != "binary":
        return "the scorecard joins a binary label's vertical split (mode='split')"
    if not heu_available():
        return "the scorecard needs the 'he' extra: pip install 'vsplit[he]'"
    return None


def _scorecard(est: Any) -> Any:
    """The scorecard with its defaults (2048-bit keys; 1024 only under the tests' flag,
    :data:`~vsplit.config.boosting.SMALL_KEYS_ENV`)."""
    from vsplit.config.boosting import small_keys_allowed
    from vsplit.scorecard_estimator import SplitScorecard

    small = {"key_bits": 1024, "insecure_small_key_for_tests": True} if small_keys_allowed() else {}
    return SplitScorecard(label_party=est.label_party, label=est.label, id_column=est.id_column,
                          positive_label=est.positive_label, categorical=est.categorical, alignment=est.alignment,
                          random_state=est.random_state, **small)
