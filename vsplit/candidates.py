"""The split's model on a small table: the split network blended with the split scorecard, by default.

Theory of operation. On a table of a few thousand customers a network has little to learn from, and a scorecard
(logistic regression on WOE-binned attributes, :class:`~vsplit.scorecard_estimator.SplitScorecard`) often ranks
better; the two err on different customers. With ``SplitClassifier(candidates="network+scorecard")`` the label party
also trains the split scorecard on the same views and scores a customer with the mean of the two models' log-odds
(:data:`WEIGHT` each): both are split models, so nothing crosses the cut that either would not send alone, and the
label party combines their outputs locally. On 1,000-row samples of ``bank_marketing_no_duration`` the split
network alone stays 0.05 AUC below a pooled logistic regression of the same columns, the blend does not
(``benchmarks/small_tables.py``, docs/models.md "Small tables").

The default, ``candidates="auto"``, trains the blend where it helps and costs little: a binary label, the vertical
topology, ``mode="split"``, the ``he`` extra installed, and at most :data:`SMALL_TABLE_ROWS` aligned training rows
(the blend gained on every 1,000- and 3,000-row sample of the benchmark; on the full presets the network alone is the
model of ``benchmarks/quality.py``). Elsewhere ``auto`` trains the network alone, and so does a small table whose
scorecard cannot be trained (an attribute with one value, a partner whose attributes all fail the binning): a
warning says why. ``candidates_`` names what was trained. ``mode="centralized"`` and ``"label_party_only"`` are the
network's oracles: ``auto`` trains the network there.

Why a fixed equal weight and not one chosen on validation rows: on such tables a tenth of the rows holds a dozen
positives, the network's validation AUC is the best of its epochs on those very rows (it chose the epoch there), and
a choice made on them picked the network on four seeds in five, and on three of those it then lost to the scorecard
by 0.03 to 0.14 on the test rows;
three-fold cross-validation of both models still chose the network on one seed in five where it lost by 0.05, at
six to eight times the training time.

``candidates="network+scorecard"`` needs a binary label, the vertical topology, ``mode="split"`` and the ``he``
extra (sf-heu), and is refused with the fix elsewhere; training then takes the scorecard's time too (binning and 50
steps: about 5 s for 1,000 customers with 2048-bit keys on 2 cores, one key pair for both). The estimator's
``scorecard_`` holds the scorecard (``None`` when the network alone was trained), and ``predict_proba``, ``evaluate``,
``score``, ``explain``, ``save`` and ``load`` use the blend.

Example:
    >>> check_candidates("network+scorecard")
    'network+scorecard'
    >>> chosen("auto", rows=1_000, applicable=None), chosen("auto", rows=20_000, applicable=None)
    ('network+scorecard', 'network')
    >>> float(blend(np.array([0.2]), np.array([0.8]))[0])
    0.5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from vsplit.errors import ConfigError

__all__ = ["CHOICES", "SMALL_TABLE_ROWS", "WEIGHT", "blend", "check_candidates", "chosen", "explain_blend",
           "fit_candidates"]

#: ``candidates``: by the table (default), the network alone, or the network blended with the scorecard
AUTO, NETWORK, BLEND = "auto", "network", "network+scorecard"
CHOICES = (AUTO, NETWORK, BLEND)
#: ``auto`` blends on at most this many aligned training rows (the benchmark's samples hold 1,000 and 3,000)
SMALL_TABLE_ROWS = 5_000
NO_HE = "the scorecard needs the 'he' extra: pip install 'vsplit[he]'"
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


def chosen(candidates: str, *, rows: int, applicable: str | None) -> str:
    """What ``candidates`` trains on ``rows`` aligned training rows, ``applicable`` being why the scorecard cannot
    join (``None``: it can): :data:`BLEND` or :data:`NETWORK` (an explicit blend that cannot join is refused)."""
    if candidates == BLEND and applicable:
        raise ConfigError(f"candidates={candidates!r}: {applicable}; or set candidates='network'")
    if candidates == AUTO:
        return BLEND if applicable is None and rows <= SMALL_TABLE_ROWS else NETWORK
    return candidates


def fit_candidates(est: Any, views: Mapping[str, pd.DataFrame]) -> None:
    """After ``est`` (a :class:`~vsplit.estimator.SplitClassifier`) trained its network: train the split scorecard on
    ``views`` too (``scorecard_``) where ``candidates`` says so; ``candidates_`` is what was trained."""
    import warnings

    from vsplit.errors import DataError

    est.scorecard_ = None
    est.candidates_ = NETWORK
    if est.candidates == NETWORK:
        return
    why = _not_applicable(est)
    if chosen(est.candidates, rows=est.n_aligned_, applicable=why) == NETWORK:
        if why == NO_HE and est.n_aligned_ <= SMALL_TABLE_ROWS:
            warnings.warn(f"candidates='auto': on {est.n_aligned_} aligned rows the split network would be blended "
                          "with the split scorecard, which needs the 'he' extra (pip install 'vsplit[he]'); the "
                          "network alone was trained", stacklevel=3)
        return
    try:
        est.scorecard_ = _scorecard(est).fit(views)
    except (ConfigError, DataError) as exc:
        if est.candidates != AUTO:
            raise
        warnings.warn(f"candidates='auto': the split scorecard cannot be trained on these views ({exc}); the network "
                      "alone scores them (set candidates='network' to skip the attempt)", stacklevel=3)
        return
    est.candidates_ = BLEND


def explain_blend(explanation: Any, scorecard: Any, views: Mapping[str, pd.DataFrame], *,
                  weight: float = WEIGHT) -> Any:
    """The blend's :class:`~vsplit.explain.explanation.Explanation` from the network's (``explanation``) and the
    scorecard's points: every attribution is ``weight`` times the network's plus ``1 - weight`` times the
    scorecard's, both in log-odds of the event. A scorecard attribute's share is its points as log-odds (``-points /
    factor``, :class:`~vsplit.scorecard.Scaling`) and its baseline the intercept (every WOE at 0), so the blend's
    attributions still sum to its score minus its baseline score (:meth:`completeness_error`). A partner's group
    is its points, the one number per row it answers when scoring; its own columns' shares are at hand only here,
    where every party runs in this process."""
    import dataclasses

    from vsplit.data.tables import normalise_ids
    from vsplit.runtime.psi import align_estimator_rows
    from vsplit.scorecard import columns_from_maps

    card, label = scorecard, scorecard.label_party
    parties = (label, *card.partners_)
    ids = {n: normalise_ids(views[n][card.id_column]) for n in parties}
    rows, _ = align_estimator_rows(ids, label_party=label, alignment=card.alignment, random_state=card.random_state)
    where = {str(v): i for i, v in enumerate(ids[label][rows[label]])}
    order = np.array([where[i] for i in explanation.ids], dtype=np.int64)  # the network's rows, in its order
    factor = card.scaling_.factor
    shares = {}
    for n in parties:
        table = views[n].iloc[rows[n][order]].reset_index(drop=True)
        codes = columns_from_maps(card.maps_[n], table).codes
        shares[n] = pd.DataFrame(-card.points_tables_[n]._per_attribute(codes) / factor,
                                 columns=list(card.points_tables_[n].names), index=explanation.ids)

    def mix(network: pd.DataFrame | None, points: pd.DataFrame) -> pd.DataFrame:
        network = network if network is not None else pd.DataFrame(index=points.index)
        both = list(dict.fromkeys([*network.columns, *points.columns]))
        return (weight * network.reindex(columns=both, fill_value=0.0)
                + (1 - weight) * points.reindex(columns=both, fill_value=0.0))

    groups = explanation.groups.copy()
    for n in card.partners_:
        own = shares[n].to_numpy().sum(axis=1)
        groups[n] = weight * (groups[n].to_numpy() if n in groups else 0.0) + (1 - weight) * own
    card_score = card.intercept_ + sum(s.to_numpy().sum(axis=1) for s in shares.values())
    note = (f"the blend of candidates='network+scorecard': {weight:g} x the network's attributions plus "
            f"{1 - weight:g} x the scorecard's (points as log-odds)")
    return dataclasses.replace(
        explanation, score=weight * np.asarray(explanation.score) + (1 - weight) * card_score,
        baseline_score=weight * np.asarray(explanation.baseline_score) + (1 - weight) * card.intercept_,
        features=mix(explanation.features, shares[label]), groups=groups,
        partners={n: mix(explanation.partners.get(n), shares[n]) for n in card.partners_},
        note="; ".join(filter(None, [explanation.note, note])))


def _not_applicable(est: Any) -> str | None:
    from vsplit.he._lib import heu_available

    if est.mode != "split" or est.topology != "vertical" or est.label_party_.task.name != "binary":
        return "the scorecard joins a binary label's vertical split (mode='split')"
    if not est.feature_parties_:
        return "the scorecard needs a partner with attributes"
    if not heu_available():
        return NO_HE
    return None


def _scorecard(est: Any) -> Any:
    """The scorecard with its defaults (2048-bit keys; 1024 only under the tests' flag,
    :data:`~vsplit.config.boosting.SMALL_KEYS_ENV`)."""
    from vsplit.config.boosting import small_keys_allowed
    from vsplit.scorecard_estimator import SplitScorecard

    small = {"key_bits": 1024, "insecure_small_key_for_tests": True} if small_keys_allowed() else {}
    positive = est.classes_[1]  # the network's event, whichever way it was found (positive_label or the classes)
    return SplitScorecard(label_party=est.label_party, label=est.label, id_column=est.id_column,
                          positive_label=positive.item() if hasattr(positive, "item") else positive,
                          categorical=est.categorical, alignment=est.alignment, random_state=est.random_state, **small)
