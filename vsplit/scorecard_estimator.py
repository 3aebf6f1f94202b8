"""The notebook front door of the vertical scorecard: :class:`SplitScorecard`, a scikit-learn estimator over views.

Theory of operation: ``fit(views)`` aligns the parties' customers by PSI in this process, bins every party's
attributes across the cut (:func:`vsplit.woe.information_value`: the label party's labels encrypted, each partner's
fine bins its own), keeps each party's attributes of IV at least ``min_iv`` (then its ``top_k`` best), and runs the
label party's :class:`~vsplit.scorecard.LabelScorecard` and every partner's :class:`~vsplit.scorecard.PartnerScorecard`
over in-memory channels and the real codec: the frames a run between organizations would send. Each party's
coefficients become its own points table (:attr:`SplitScorecard.points_tables_`). ``predict_proba(views)`` aligns
the views the same way and runs the one-round scoring machines (each partner answers one number per row, its points).

Example:
    >>> import numpy as np, pandas as pd, warnings
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(400)]
    >>> x, age = rng.normal(size=400), rng.normal(size=400)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": (x + age > 0).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1]})}
    >>> card = SplitScorecard(fine_bins=5, iterations=20, key_bits=1024, insecure_small_key_for_tests=True)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     card = card.fit(views)
    >>> card.predict_proba(views).shape, card.evaluate(views)["gini"] > 0.6, sorted(card.points_tables_)
    ((400, 2), True, ['bank', 'shop'])
"""

from __future__ import annotations

import hashlib
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from vsplit.data.tables import normalise_ids
from vsplit.errors import ConfigError, DataError
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.runtime.psi import align_estimator_rows
from vsplit.scorecard import (
    LabelPoints,
    LabelScorecard,
    PartnerPointsMachine,
    PartnerScorecard,
    PointsTable,
    Scaling,
    ScorecardParams,
    columns_from_maps,
    sigmoid,
)
from vsplit.views_estimator import ViewsEstimator


class SplitScorecard(ClassifierMixin, ViewsEstimator):
    """A scorecard across the cut: WOE binning of every party's attributes, then logistic regression on the WOE of
    the selected ones, scaled to points; ``X`` is ``{party: DataFrame}`` (each with the ID column, the label
    party's with the label).

    Args:
        fine_bins, min_bin_share, monotonic, max_coarse_bins: the binning (:func:`vsplit.woe.information_value`).
        min_iv, top_k: each party keeps its attributes of IV at least ``min_iv``, then the ``top_k`` best (0: all).
        iterations, learning_rate, l2: the optimiser (:class:`~vsplit.scorecard.ScorecardParams`).
        base_score, base_odds, pdo: the points scale (:class:`~vsplit.scorecard.Scaling`).
        share_names: per partner (or for all): whether its attribute names show in reason codes (else ``#k``).
        reasons: reason codes per row in :meth:`points`.

    Attributes:
        coef_: party -> its coefficients (one per selected attribute); ``intercept_``: the label party's.
        selected_: party -> its selected attributes; ``value_report_``: the binning's value report.
        points_tables_: party -> its :class:`~vsplit.scorecard.PointsTable`; ``base_points_``: the intercept's.
    """

    allows_nan = True  # missing values have a bin of their own

    def __init__(self, *, label_party: str = "bank", label: str = "y", id_column: str = "customer_id",
                 positive_label: object = None, categorical: Mapping[str, Sequence[str]] | None = None,
                 fine_bins: int = 20, min_bin_share: float = 0.05, monotonic: str = "auto", max_coarse_bins: int = 10,
                 min_iv: float = 0.0, top_k: int = 0, iterations: int = 50, learning_rate: float = 2.0,
                 l2: float = 0.0, base_score: float = 600.0, base_odds: float = 50.0, pdo: float = 20.0,
                 share_names: Mapping[str, bool] | bool = False, reasons: int = 3, scheme: str = "ou",
                 key_bits: int = 2048, insecure_small_key_for_tests: bool = False, alignment: str = "psi",
                 random_state: int = 0) -> None:
        self.label_party = label_party
        self.label = label
        self.id_column = id_column
        self.positive_label = positive_label
        self.categorical = categorical
        self.fine_bins = fine_bins
        self.min_bin_share = min_bin_share
        self.monotonic = monotonic
        self.max_coarse_bins = max_coarse_bins
        self.min_iv = min_iv
        self.top_k = top_k
        self.iterations = iterations
        self.learning_rate = learning_rate
        self.l2 = l2
        self.base_score = base_score
        self.base_odds = base_odds
        self.pdo = pdo
        self.share_names = share_names
        self.reasons = reasons
        self.scheme = scheme
        self.key_bits = key_bits
        self.insecure_small_key_for_tests = insecure_small_key_for_tests
        self.alignment = alignment
        self.random_state = random_state

    def fit(self, views: Mapping[str, pd.DataFrame]) -> SplitScorecard:
        """Align, bin across the cut, select, and train the scorecard.

        Raises:
            ConfigError: a parameter out of range. DataError: views that cannot be used (a label that is not binary,
                an attribute with a single value, no attribute kept by a partner).
        """
        from vsplit.he import generate_keypair
        from vsplit.woe import information_value
        from vsplit.woe.notebook import labels_of

        started = time.perf_counter()
        params = ScorecardParams(iterations=self.iterations, learning_rate=self.learning_rate, l2=self.l2)
        scaling = Scaling(base_score=self.base_score, base_odds=self.base_odds, pdo=self.pdo)
        label, partners = self.label_party, [n for n in views if n != self.label_party]
        if not partners:
            raise DataError("SplitScorecard: no partner view; a scorecard across the cut needs one")
        # the label party's one key pair for the binning and the regression (a prime search: seconds at 2048 bits)
        keys = generate_keypair(scheme=self.scheme, key_bits=self.key_bits,
                                insecure_small_key_for_tests=self.insecure_small_key_for_tests)
        iv = information_value(
            views, label_party=label, label=self.label, id_column=self.id_column, positive_label=self.positive_label,
            categorical=self.categorical, fine_bins=self.fine_bins, share_names=self.share_names,
            min_bin_share=self.min_bin_share, monotonic=self.monotonic, max_coarse_bins=self.max_coarse_bins,
            scheme=self.scheme, key_bits=self.key_bits, insecure_small_key_for_tests=self.insecure_small_key_for_tests,
            alignment=self.alignment, random_state=self.random_state, keys=keys)
        self.value_report_, self.rows_ = iv.report, iv.rows
        self.selected_ = {n: iv.binnings[n].select(min_iv=self.min_iv, top_k=self.top_k) for n in views}
        for n in partners:
            if not self.selected_[n]:
                raise ConfigError(f"SplitScorecard: min_iv = {self.min_iv} keeps none of {n!r}'s attributes; lower it")
        self.maps_ = {n: [m for a in self.selected_[n] for m in iv.binnings[n].maps if m.name == a] for n in views}
        columns = {n: columns_from_maps(self.maps_[n], views[n].iloc[iv.rows[n]].reset_index(drop=True))
                   for n in views}
        labels = labels_of(views[label][self.label], name=self.label, party=label,
                           positive_label=self.positive_label)[iv.rows[label]]
        machines: dict[str, Any] = {label: LabelScorecard(
            columns[label].matrix(), labels=labels, partners=partners, params=params, scaling=scaling, keys=keys)}
        for n in partners:
            machines[n] = PartnerScorecard(columns[n], label=label, schemes=(self.scheme,),
                                           min_key_bits=min(self.key_bits, 2048), share_names=self._shares(n),
                                           insecure_small_key_for_tests=self.insecure_small_key_for_tests)
        results = run_machines(connect([label, *partners], session=self._session("fit")), machines)
        coef, self.intercept_ = results[label]
        self.coef_ = {label: np.asarray(coef), **{n: np.asarray(results[n]) for n in partners}}
        self.partners_, self.scaling_ = partners, scaling
        self.base_points_ = scaling.base_points(self.intercept_)
        self.points_tables_ = {n: PointsTable.of(names=columns[n].names, labels=columns[n].labels,
                                                 woe=columns[n].woe, coef=self.coef_[n], scaling=scaling)
                               for n in views}
        self.classes_ = np.array([0, 1])
        self.fit_seconds_ = time.perf_counter() - started
        return self

    # -- as data ---------------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What scoring needs, as plain arrays, numbers and strings (no pickle): every party's selected WOE maps and
        coefficients, the intercept and the points scale. :meth:`SplitClassifier.save
        <vsplit.estimator.SplitClassifier.save>` keeps a blend's scorecard this way; :meth:`from_state` reads it."""
        check_is_fitted(self, "coef_")
        s = self.scaling_
        return {"label_party": self.label_party, "partners": list(self.partners_),
                "maps": {n: [m.state() for m in maps] for n, maps in self.maps_.items()},
                "coef": {n: np.asarray(c, dtype=np.float64) for n, c in self.coef_.items()},
                "intercept": float(self.intercept_), "scaling": [s.base_score, s.base_odds, s.pdo],
                "selected": {n: list(v) for n, v in self.selected_.items()}}

    @classmethod
    def from_state(cls, state: Mapping[str, Any], **params: Any) -> SplitScorecard:
        """The fitted scorecard :meth:`state` wrote, with ``params`` (its estimator parameters); it scores
        (``points``, ``predict_proba``, ``evaluate``) as the saved one did. ``value_report_`` and ``rows_`` (about
        the training rows) are not kept."""
        from vsplit.scorecard.columns import map_tables
        from vsplit.woe.maps import WoeMap

        card = cls(**params)
        if str(state["label_party"]) != card.label_party:
            raise ConfigError(f"a scorecard of label party {state['label_party']!r}, not {card.label_party!r}")
        base_score, base_odds, pdo = (float(v) for v in state["scaling"])
        card.scaling_ = Scaling(base_score=base_score, base_odds=base_odds, pdo=pdo)
        card.partners_ = [str(n) for n in state["partners"]]
        card.maps_ = {str(n): [WoeMap.from_state(m) for m in maps] for n, maps in state["maps"].items()}
        card.coef_ = {str(n): np.asarray(c, dtype=np.float64).ravel() for n, c in state["coef"].items()}
        card.selected_ = {str(n): [str(a) for a in v] for n, v in state["selected"].items()}
        card.intercept_ = float(state["intercept"])
        card.base_points_ = card.scaling_.base_points(card.intercept_)
        card.points_tables_ = {}
        for n, maps in card.maps_.items():
            names, woe, labels = map_tables(maps)
            card.points_tables_[n] = PointsTable.of(names=names, labels=labels, woe=woe, coef=card.coef_[n],
                                                    scaling=card.scaling_)
        card.classes_ = np.array([0, 1])
        return card

    def _shares(self, party: str) -> bool:
        s = self.share_names
        return bool(s.get(party, False)) if isinstance(s, Mapping) else bool(s)

    # -- scoring ---------------------------------------------------------------------------------------------------
    def points(self, views: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
        """Per row of the label party's view: ``score``, each party's points and the reason codes (NaN and empty for
        a customer some partner does not know)."""
        check_is_fitted(self, "coef_")
        label = self.label_party
        ids = {n: normalise_ids(views[n][self.id_column]) for n in (label, *self.partners_)}
        rows, _ = align_estimator_rows(ids, label_party=label, alignment=self.alignment,
                                       random_state=self.random_state)
        codes = {n: columns_from_maps(self.maps_[n], views[n].iloc[rows[n]].reset_index(drop=True)).codes
                 for n in rows}
        machines: dict[str, Any] = {label: LabelPoints(self.points_tables_[label], own_codes=codes[label],
                                                       base_points=self.base_points_, partners=self.partners_,
                                                       reasons=self.reasons, name=label)}
        for n in self.partners_:
            machines[n] = PartnerPointsMachine(self.points_tables_[n], codes=codes[n], label=label,
                                               share_names=self._shares(n))
        scored = run_machines(connect([label, *self.partners_], session=self._session("predict")), machines)[label]
        out = pd.DataFrame(index=range(len(views[label])))
        out["score"] = np.nan
        out.loc[rows[label], "score"] = scored.score
        for n, values in scored.by_party.items():
            out[f"points_{n}"] = np.nan
            out.loc[rows[label], f"points_{n}"] = values
        out["reasons"] = ""
        if scored.reasons:
            out.loc[rows[label], "reasons"] = ["; ".join(f"{p}:{a} (-{c:.1f})" for p, a, c in r)
                                               for r in scored.reasons]
        return out

    def predict_proba(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """Class probabilities ``(n, 2)`` of the label party's rows, in its order (NaN, with a warning, for the
        customers some partner does not know)."""
        score = self.points(views)["score"].to_numpy(dtype=np.float64)
        p = sigmoid(self.scaling_.log_odds(score))
        if np.isnan(score).any():
            warnings.warn(f"{int(np.isnan(score).sum())} customers of {self.label_party!r} are unknown to a partner "
                          "and were not scored (NaN)", stacklevel=2)
        return np.column_stack([1 - p, p])

    def predict(self, views: Mapping[str, pd.DataFrame], *, threshold: float = 0.5) -> np.ndarray:
        """1 where the event's probability reaches ``threshold`` (0 elsewhere, and for customers not scored)."""
        return (self.predict_proba(views)[:, 1] >= threshold).astype(np.int64)

    def evaluate(self, views: Mapping[str, pd.DataFrame]) -> dict[str, float]:
        """``auc``, ``gini`` (2 AUC - 1) and ``n_scored`` on the rows every party knows."""
        from sklearn.metrics import roc_auc_score

        from vsplit.woe.notebook import labels_of

        p = self.predict_proba(views)[:, 1]
        y = labels_of(views[self.label_party][self.label], name=self.label, party=self.label_party,
                      positive_label=self.positive_label)
        known = ~np.isnan(p)
        auc = float(roc_auc_score(y[known], p[known]))
        return {"auc": auc, "gini": 2 * auc - 1, "n_scored": int(known.sum())}

    def _session(self, what: str) -> bytes:
        return hashlib.sha256(f"vsplit-scorecard-{what}-{self.random_state}".encode()).digest()[:16]
