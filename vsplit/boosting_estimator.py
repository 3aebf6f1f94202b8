"""The notebook front door of vertical boosting: :class:`SplitBoostClassifier`, a scikit-learn estimator over views.

Theory of operation: ``fit(views)`` aligns the parties' customers by PSI in this process (the code path of
:class:`~vsplit.estimator.SplitClassifier`: :func:`vsplit.runtime.psi.align_in_process`, rows in sorted-ID order),
lets each party bin its own columns on its own aligned training rows (:func:`~vsplit.boosting.bins.fit_bins`; text
columns become categories), and runs the label party's :class:`~vsplit.boosting.label.LabelBoost` and every
partner's :class:`~vsplit.boosting.partner.PartnerBoost` over in-memory channels and the real codec
(:mod:`vsplit.runtime.inprocess`): the frames a run between organizations would send. ``predict_proba(views)``
aligns the views the same way and runs the one-round prediction machines (:mod:`vsplit.boosting.predict`).

Early stopping (``early_stopping_rounds``) holds out ``validation_fraction`` of the aligned rows, trains
``n_estimators`` trees on the rest, scores every prefix of the trees on the held-out rows from one prediction round
and keeps the trees up to the best one (XGBoost's rule: stop after ``early_stopping_rounds`` trees without a better
score). The kept trees are exactly those an early-stopped run grows, as a tree never depends on later ones; the
machines train a fixed number of trees, so the time of the trees after the stop is not saved.

:meth:`SplitBoostClassifier.explain` credits each split's change of the node value to the party owning it
(:mod:`vsplit.boosting.explain`): per row, the label party's own columns and each partner as one group, adding up to
the margin; no message beyond the prediction round.

Example:
    >>> import numpy as np, pandas as pd, warnings
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(300)]
    >>> x, age = rng.normal(size=300), rng.normal(size=300)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": (x + age > 0).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1]})}
    >>> clf = SplitBoostClassifier(n_estimators=3, max_depth=2, key_bits=1024, insecure_small_key_for_tests=True)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     clf = clf.fit(views)
    >>> clf.predict_proba(views).shape, clf.classes_.tolist(), clf.evaluate(views)["auc"] > 0.8
    ((300, 2), [0, 1], True)
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
from sklearn.metrics import accuracy_score
from sklearn.utils.validation import check_is_fitted

from vsplit.boosting.bins import fit_bins, rank_codes
from vsplit.boosting.explain import ExplainPredict, kept_values
from vsplit.boosting.gains import BoostParams
from vsplit.boosting.label import LabelBoost
from vsplit.boosting.partner import PartnerBoost, PartnerModel
from vsplit.boosting.predict import PartnerPredict
from vsplit.boosting.trees import BoostModel
from vsplit.data.labels import positive_class
from vsplit.data.tables import normalise_ids
from vsplit.errors import ConfigError, DataError
from vsplit.explain.path import PathExplanation, explain_trees
from vsplit.he import SCHEMES
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.runtime.psi import align_estimator_rows
from vsplit.views_estimator import ViewsEstimator

__all__ = ["PathExplanation", "SplitBoostClassifier"]
METRICS = ("logloss", "auc")


class SplitBoostClassifier(ClassifierMixin, ViewsEstimator):
    """Binary gradient-boosted trees trained across parties held as separate DataFrames (vertical SecureBoost).

    A scikit-learn classifier whose ``X`` is ``{party name: DataFrame}``, the 0/1 (or no/yes) labels a column of the
    label party's view, like :class:`~vsplit.estimator.SplitClassifier`: ``__init__`` only stores the parameters,
    ``fit`` returns the estimator, what it learns ends in ``_``, :func:`sklearn.base.clone` and ``get_params`` work.
    Needs sf-heu (``pip install 'vsplit[he]'``).

    Args:
        label_party, label, id_column, positive_label: as for :class:`~vsplit.estimator.SplitClassifier`.
        n_estimators, max_depth, learning_rate, reg_lambda, gamma, min_child_weight: XGBoost's meanings
            (:class:`~vsplit.boosting.gains.BoostParams`).
        goss_top_rate, goss_other_rate: GOSS (SecureBoost+): per tree the rows of the largest ``goss_top_rate``
            share of gradients and a ``goss_other_rate`` sample of the rest (seeded by ``random_state``); 0 and 0:
            every row (:class:`~vsplit.boosting.gains.BoostParams`).
        max_bins: value bins per column, each party binning its own columns on its own training rows.
        categorical: categorical columns per party (default: the columns of text or category dtype).
        order_categories: order each categorical column's codes by the label party's smoothed label rate at the
            first tree's root, so one threshold splits the categories by rate (as LightGBM and CatBoost do by
            target); a partner then learns that order of its own categories (docs/boosting.md). Default off.
            ``min_category_rows``: a category of fewer rows is not ordered (it keeps its place after the others),
            so its rank tells nothing of its few customers' labels.
        early_stopping_rounds: keep the trees up to the best score on held-out rows, stopping after this many trees
            without a better one (``None``: keep every tree); ``validation_fraction``: the aligned rows held out;
            ``eval_metric``: ``"logloss"`` or ``"auc"``.
        scheme, key_bits: the homomorphic encryption (``"ou"`` by default, 2048 bits; docs/he.md).
        insecure_small_key_for_tests: allow a 1024-bit OU key (with a warning): tests and docs only.
        min_node_rows: a partner refuses to sum a node of fewer rows.
        alignment: ``"psi"`` (default) or ``"join"`` (a plain join of the raw IDs).
        random_state: the seed of the validation rows and of the PSI session's context.

    Attributes (after ``fit``):
        model_: the label party's :class:`~vsplit.boosting.trees.BoostModel`; ``partner_models_``: each partner's
            :class:`~vsplit.boosting.partner.PartnerModel` (in one process here; each keeps its own in a real run).
        bins_, encoders_: each party's binning and text categories; ``party_feature_names_in_``, ``n_features_in_``.
        rows_: each party's aligned rows the trees were trained on; ``validation_rows_``: those held out.
        classes_: ``[negative, positive]``; ``best_iteration_``, ``evals_result_``: (early stopping) the 0-based
            index of the last kept tree and the validation score after each tree.
        node_values_: each tree's node values (the explanations' path values); ``psi_stats_``, ``fit_seconds_``.
    """

    allows_nan = True  # missing values have a bin of their own

    def __init__(
        self,
        *,
        label_party: str = "bank",
        label: str = "y",
        id_column: str = "customer_id",
        positive_label: object = None,
        n_estimators: int = 100,
        max_depth: int = 5,
        learning_rate: float = 0.3,
        reg_lambda: float = 1.0,
        gamma: float = 0.0,
        min_child_weight: float = 1.0,
        goss_top_rate: float = 0.0,
        goss_other_rate: float = 0.0,
        max_bins: int = 32,
        categorical: Mapping[str, Sequence[str]] | None = None,
        order_categories: bool = False,
        min_category_rows: int = 30,
        early_stopping_rounds: int | None = None,
        validation_fraction: float = 0.1,
        eval_metric: str = "logloss",
        scheme: str = "ou",
        key_bits: int = 2048,
        insecure_small_key_for_tests: bool = False,
        min_node_rows: int = 1,
        alignment: str = "psi",
        random_state: int = 0,
    ) -> None:
        self.label_party = label_party
        self.label = label
        self.id_column = id_column
        self.positive_label = positive_label
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.reg_lambda = reg_lambda
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.goss_top_rate = goss_top_rate
        self.goss_other_rate = goss_other_rate
        self.max_bins = max_bins
        self.categorical = categorical
        self.order_categories = order_categories
        self.min_category_rows = min_category_rows
        self.early_stopping_rounds = early_stopping_rounds
        self.validation_fraction = validation_fraction
        self.eval_metric = eval_metric
        self.scheme = scheme
        self.key_bits = key_bits
        self.insecure_small_key_for_tests = insecure_small_key_for_tests
        self.min_node_rows = min_node_rows
        self.alignment = alignment
        self.random_state = random_state

    # -- training --------------------------------------------------------------------------------------------------
    def fit(self, views: Mapping[str, pd.DataFrame]) -> SplitBoostClassifier:
        """Align the parties' customers, bin each party's columns on its own rows and grow the trees.

        Raises:
            ConfigError: a parameter out of range, or sf-heu missing (the message names ``pip install
                'vsplit[he]'``).
            DataError, AlignmentError: the views cannot be used (no shared customers, a label that is not binary).
        """
        from vsplit.he._lib import heu_modules

        started = time.perf_counter()
        params = self._check(views)
        for stale in ("best_iteration_", "evals_result_"):  # of an earlier fit with early stopping
            vars(self).pop(stale, None)
        heu_modules()  # before any work: a missing extra is named at once
        label, partners = self.label_party, [n for n in views if n != self.label_party]
        self.partners_ = partners
        features = {n: self._features(n, views[n]) for n in (label, *partners)}
        aligned = self._align({n: normalise_ids(views[n][self.id_column]) for n in features})
        labels = self._labels(views[label][self.label])[aligned[label]]
        fit_at, valid_at = self._validation(len(labels))
        self.rows_ = {n: rows[fit_at] for n, rows in aligned.items()}
        self.validation_rows_ = {n: rows[valid_at] for n, rows in aligned.items()}
        self.party_feature_names_in_ = {n: list(t.columns) for n, t in features.items()}
        self.n_features_in_ = sum(len(c) for c in self.party_feature_names_in_.values())
        self.encoders_ = {n: self._encoders(n, t.iloc[self.rows_[n]]) for n, t in features.items()}
        numbers = {n: _numbers(t, self.encoders_[n]) for n, t in features.items()}
        self.bins_ = {n: fit_bins(numbers[n][self.rows_[n]], max_bins=self.max_bins,
                                  categorical=[i for i, c in enumerate(features[n].columns) if c in self.encoders_[n]])
                      for n in features}
        codes = {n: self.bins_[n].transform(numbers[n][aligned[n]]) for n in features}
        model, partner_models, ranks = self._train({n: c[fit_at] for n, c in codes.items()}, labels[fit_at], params)
        if any(r is not None for r in ranks.values()):  # the first tree renumbered categorical codes
            self.bins_ = {n: b.ranked(ranks.get(n)) for n, b in self.bins_.items()}
            codes = {n: rank_codes(c, ranks.get(n)) for n, c in codes.items()}
        _, bits = self._one_round(model, partner_models, codes)
        if len(valid_at):
            model, partner_models = self._stop_early(model, partner_models, codes[label][valid_at],
                                                     {k: b[valid_at] for k, b in bits.items()}, labels[valid_at])
        self.model_, self.partner_models_ = model, partner_models
        self.node_values_ = kept_values(model, params)  # from the sums training kept: no replay
        self.n_aligned_ = len(labels)
        self.fit_seconds_ = time.perf_counter() - started
        return self

    def _train(self, codes: Mapping[str, np.ndarray], labels: np.ndarray,
               params: BoostParams) -> tuple[BoostModel, dict[str, PartnerModel], dict[str, np.ndarray | None]]:
        """The label party's and the partners' training machines over memory channels and the codec; the model,
        each partner's records, and each party's renumbering of its codes (``None``: none)."""
        label, partners = self.label_party, self.partners_
        machines: dict[str, Any] = {label: LabelBoost(
            codes[label], width=self.bins_[label].width, labels=labels, partners=partners, params=params,
            scheme=self.scheme, key_bits=self.key_bits, insecure_small_key_for_tests=self.insecure_small_key_for_tests,
            categorical=self.bins_[label].categorical,
        )}
        for name in partners:
            machines[name] = PartnerBoost(
                codes[name], width=self.bins_[name].width, label=label, schemes=(self.scheme,),
                min_key_bits=min(self.key_bits, 2048), min_node_rows=self.min_node_rows,
                insecure_small_key_for_tests=self.insecure_small_key_for_tests,
                categorical=self.bins_[name].categorical,
            )
        results = run_machines(connect([label, *partners], session=self._session("fit")), machines)
        return results[label], {n: results[n] for n in partners}, {n: m.ranks for n, m in machines.items()}

    def _one_round(self, model: BoostModel, partner_models: Mapping[str, PartnerModel],
                   codes: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """One prediction round on aligned rows: the probabilities, and each partner's bits (by partner index)."""
        label = self.label_party
        bank = ExplainPredict(model, own_codes=codes[label], partners=self.partners_)
        machines: dict[str, Any] = {label: bank}
        for name in self.partners_:
            machines[name] = PartnerPredict(partner_models[name], codes=codes[name], label=label)
        proba = run_machines(connect([label, *self.partners_], session=self._session("predict")), machines)[label]
        return np.asarray(proba), bank.bits

    def _stop_early(self, model: BoostModel, partner_models: Mapping[str, PartnerModel], own: np.ndarray,
                    bits: Mapping[int, np.ndarray], labels: np.ndarray) -> tuple[BoostModel, dict[str, PartnerModel]]:
        """Keep the trees up to the best validation score (stop after ``early_stopping_rounds`` without one)."""
        from vsplit.metrics import binary_metrics

        margin, scores, best = np.full(len(labels), model.base), [], 0
        for k, tree in enumerate(model.trees):  # a loop over trees; each walked once
            margin = margin + BoostModel(trees=(tree,), base=0.0, widths=model.widths).margins(
                own_codes=own, decisions=bits)
            metrics = binary_metrics(labels, 1 / (1 + np.exp(-margin)))
            scores.append(metrics["log_loss"] if self.eval_metric == "logloss" else metrics["auc"])
            sign = 1.0 if self.eval_metric == "logloss" else -1.0
            if sign * scores[k] < sign * scores[best]:
                best = k
            elif k - best >= int(self.early_stopping_rounds or 0):
                break
        self.best_iteration_ = best
        self.evals_result_ = {"validation": {self.eval_metric: scores}}
        return _prefix(model, partner_models, best + 1, self.partners_)

    # -- prediction ------------------------------------------------------------------------------------------------
    def predict_proba(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """Class probabilities ``(n, 2)`` of the label party's rows, in its order; NaN (with a warning) for the
        customers some partner does not know (they cannot be scored)."""
        p, known, *_ = self._score(views)
        if not known.all():
            warnings.warn(f"{int((~known).sum())} of {len(known)} customers of {self.label_party!r} are unknown to a "
                          "partner and were not scored (NaN)", stacklevel=2)
        return np.column_stack([1 - p, p])

    def predict(self, views: Mapping[str, pd.DataFrame], *, threshold: float = 0.5) -> np.ndarray:
        """The predicted class of each of the label party's rows (``None`` where it cannot be scored)."""
        p, known, *_ = self._score(views)
        codes = (p >= threshold).astype(np.int64)
        if known.all():
            return self.classes_[codes]
        out = np.full(len(p), None, dtype=object)
        out[known] = self.classes_[codes[known]]
        return out

    def score(self, views: Mapping[str, pd.DataFrame], y: None = None) -> float:
        """Accuracy on the label party's rows every party knows (``y`` stays ``None``: the labels are its column)."""
        if y is not None:
            raise ConfigError(f"score takes the labels from the label party's column {self.label!r}; leave y=None")
        targets, p, known = self._targets(views)
        return float(accuracy_score(targets[known], (p[known] >= 0.5).astype(int)))

    def evaluate(self, views: Mapping[str, pd.DataFrame]) -> dict[str, float]:
        """``auc``, ``ks``, ``accuracy``, ``f1``, ``log_loss`` and ``n_scored`` on the rows every party knows."""
        from vsplit.metrics import binary_metrics

        targets, p, known = self._targets(views)
        metrics = binary_metrics(targets[known], p[known])
        metrics["n_scored"] = int(known.sum())
        return metrics

    def explain(self, views: Mapping[str, pd.DataFrame]) -> PathExplanation:
        """Per-party contributions of each row's margin for the rows every party knows, in sorted-ID order (path
        attribution, :mod:`vsplit.boosting.explain`): the label party's own columns (``features``) and each partner
        as one group (``groups``); ``.parties()`` is the table by party, and
        ``vsplit.explain.reasons.reason_codes(e.by_party())`` the parties costing each declined row most.

        Raises:
            ProtocolError: (a bug) the contributions do not add up to the margin.
        """
        _, _, codes, bits, ids = self._score(views)
        label = self.label_party
        return explain_trees(self.model_, self.node_values_, own_codes=codes[label], decisions=bits, ids=list(ids),
                             own_columns=self.party_feature_names_in_[label], partners=self.partners_,
                             label_party=label)

    def _targets(self, views: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p, known, *_ = self._score(views)
        return self._labels(views[self.label_party][self.label], fitted=True), p, known

    def _score(self, views: Mapping[str, pd.DataFrame]) -> tuple[Any, ...]:
        """Probabilities in the label party's order, which rows are known to all, and for the aligned rows (sorted-ID
        order) every party's codes, the partners' bits and the label party's IDs."""
        check_is_fitted(self, "model_")
        label = self.label_party
        missing = [n for n in (label, *self.partners_) if n not in views]
        if missing:
            raise DataError(f"scoring needs the tables of {missing} as well (the model was trained with them)")
        ids = {n: normalise_ids(views[n][self.id_column]) for n in (label, *self.partners_)}
        rows = self._align(ids, store=False)
        codes = {}
        for n in ids:
            absent = [c for c in self.party_feature_names_in_[n] if c not in views[n].columns]
            if absent:
                raise DataError(f"{n}: columns {absent} are missing; the model was trained with them")
            table = views[n][self.party_feature_names_in_[n]]
            codes[n] = self.bins_[n].transform(_numbers(table, self.encoders_[n])[rows[n]])
        proba, bits = self._one_round(self.model_, self.partner_models_, codes)
        p = np.full(len(ids[label]), np.nan)
        p[rows[label]] = proba
        known = np.zeros(len(p), dtype=bool)
        known[rows[label]] = True
        return p, known, codes, bits, ids[label][rows[label]]

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _check(self, views: Mapping[str, pd.DataFrame]) -> BoostParams:
        if self.label_party not in views:
            raise ConfigError(f"label_party {self.label_party!r} is not among the views {sorted(views)}")
        if len(views) < 2:
            raise ConfigError("boosting across the cut needs the label party's view and at least one partner's")
        if self.alignment not in ("psi", "join"):
            raise ConfigError(f"alignment must be 'psi' or 'join', got {self.alignment!r}")
        if self.scheme not in SCHEMES:
            raise ConfigError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if self.eval_metric not in METRICS:
            raise ConfigError(f"eval_metric must be one of {METRICS}, got {self.eval_metric!r}")
        if self.early_stopping_rounds is not None and (self.early_stopping_rounds < 1
                                                       or not 0 < self.validation_fraction < 1):
            raise ConfigError("early stopping needs early_stopping_rounds >= 1 and validation_fraction in (0, 1), "
                              f"got {self.early_stopping_rounds} and {self.validation_fraction}")
        return BoostParams(trees=self.n_estimators, max_depth=self.max_depth, learning_rate=self.learning_rate,
                           reg_lambda=self.reg_lambda, gamma=self.gamma, min_child_weight=self.min_child_weight,
                           goss_top_rate=self.goss_top_rate, goss_other_rate=self.goss_other_rate,
                           seed=self.random_state, order_categories=self.order_categories,
                           min_category_rows=self.min_category_rows)

    def _features(self, party: str, table: pd.DataFrame) -> pd.DataFrame:
        """A party's feature columns: every column but the ID (and the label, at the label party)."""
        if self.id_column not in table.columns:
            raise DataError(f"{party}: no ID column {self.id_column!r}; set id_column to the customer-ID column")
        if party != self.label_party and self.label in table.columns:
            raise DataError(f"{party}: holds a column named like the label {self.label!r}; only the label party "
                            "may hold the labels (rename or drop it)")
        if party == self.label_party and self.label not in table.columns:
            raise DataError(f"{party}: no label column {self.label!r}; set label to the label column")
        return table.drop(columns=[c for c in (self.id_column, self.label) if c in table.columns])

    def _encoders(self, party: str, table: pd.DataFrame) -> dict[str, list[str]]:
        """The categories of each categorical column of ``table`` (the party's training rows), sorted."""
        named = list((self.categorical or {}).get(party, ()))
        unknown = [c for c in named if c not in table.columns]
        if unknown:
            raise ConfigError(f"categorical[{party!r}]: no columns {unknown} in its view")
        text = [c for c in table.columns if c in named or not pd.api.types.is_numeric_dtype(table[c])]
        return {c: sorted(map(str, table[c].dropna().unique())) for c in text}

    def _labels(self, column: pd.Series, *, fitted: bool = False) -> np.ndarray:
        """0/1 labels; at ``fit`` also the positive class and ``classes_``."""
        if column.isna().any():
            raise DataError(f"label {self.label!r} has {int(column.isna().sum())} missing values; drop those rows")
        if not fitted:
            values = list(pd.unique(column))
            positive = self.positive_label if self.positive_label is not None else _positive(values, self.label)
            if len(values) > 2 or positive not in values:
                raise DataError(f"label {self.label!r}: values {sorted(map(str, values))}, positive label "
                                f"{positive!r}; boosting here is binary")
            others = [v for v in values if v != positive]
            self.classes_ = np.array([others[0] if others else None, positive])
        return (column.to_numpy() == self.classes_[1]).astype(np.float64)

    def _validation(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """Positions (in aligned order) of the training rows and of the held-out validation rows."""
        if self.early_stopping_rounds is None:
            return np.arange(rows), np.empty(0, dtype=np.int64)
        held = np.random.default_rng(self.random_state).permutation(rows)[: round(rows * self.validation_fraction)]
        inside = np.zeros(rows, dtype=bool)
        inside[held] = True
        return np.flatnonzero(~inside), np.flatnonzero(inside)

    def _align(self, ids: dict[str, np.ndarray], *, store: bool = True) -> dict[str, np.ndarray]:
        """Each party's rows of the customers all share, in sorted-ID order: PSI (default) or a plain join, as
        :class:`~vsplit.estimator.SplitClassifier` aligns."""
        rows, psi_stats = align_estimator_rows(ids, label_party=self.label_party, alignment=self.alignment,
                                               random_state=self.random_state)
        if store and psi_stats is not None:
            self.psi_stats_ = psi_stats
        return rows

    def _session(self, what: str) -> bytes:
        return hashlib.sha256(f"vsplit-boost-{what}-{self.random_state}".encode()).digest()[:16]


def _positive(values: Sequence[object], label: str) -> object:
    """The positive class of two label values (:func:`vsplit.data.labels.positive_class`)."""
    if len(set(values)) != 2:
        raise DataError(f"label {label!r} has {len(set(values))} distinct values; boosting here is binary (two)")
    return positive_class(set(values), label)


def _numbers(table: pd.DataFrame, encoders: Mapping[str, Sequence[str]]) -> np.ndarray:
    """A party's columns as floats (NaN: missing); a category as its index among ``encoders``, an unseen one -1."""
    out = np.empty(table.shape, dtype=np.float64)
    for i, column in enumerate(table.columns):  # a loop over columns
        values = table[column]
        if column in encoders:
            index = {c: float(k) for k, c in enumerate(encoders[column])}
            out[:, i] = [np.nan if pd.isna(v) else index.get(str(v), -1.0) for v in values]
        else:
            out[:, i] = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return out


def _prefix(model: BoostModel, partner_models: Mapping[str, PartnerModel], trees: int,
            partners: Sequence[str]) -> tuple[BoostModel, dict[str, PartnerModel]]:
    """The first ``trees`` trees, and of each partner the records they use (numbered in the order trees grow)."""
    kept = model.trees[:trees]
    out = {}
    for k, name in enumerate(partners, start=1):
        used = sum(s.party == k for t in kept for s in t.splits.values())
        m = partner_models[name]
        out[name] = PartnerModel(columns=m.columns[:used], bins=m.bins[:used], missing_left=m.missing_left[:used],
                                 width=m.width)
    return BoostModel(trees=kept, base=model.base, widths=model.widths), out

