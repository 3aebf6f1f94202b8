"""A split ensemble: the label party combines split networks and vertical boosted trees with one weight.

Theory of operation: ``fit(views)`` sets aside ``weight_fraction`` of the label party's rows (stratified, seeded:
:func:`vsplit.tune.rows.validation_views`), trains on the rest a :class:`~vsplit.bagging.SplitBag` of ``networks``
split networks and one :class:`~vsplit.boosting_estimator.SplitBoostClassifier`, scores the set-aside rows with both
(one prediction each) and keeps the weight ``w`` of :data:`WEIGHTS` whose combination has the best AUC there. The
combination is on the log-odds scale, ``w * mean(network log-odds) + (1 - w) * tree margin``, so the per-party
contributions of the ensemble are the same weighted sums of each model's contributions (:meth:`explain`). The weight is
chosen on rows of ``views`` only: the test rows are never seen (tests/test_ensemble.py poisons their labels).

``trees="auto"`` first chooses the trees' parameters on validation rows of the training part: each candidate of
:data:`TREE_GRID` is boosted by the pooled twin (:class:`~vsplit.pooled_trees.PooledBoostClassifier`, equal to the
split trees and fast, in plaintext), early-stopped on its own validation rows (the rows the split trees then hold out
too), and the best validation AUC wins; the split trees then grow exactly the kept number of trees. With ``refit``
those first-stage trees only score the set-aside rows, and the winning candidate *is* them (the same rows, validation
rows and seeds; tests/test_ensemble.py), so it scores them and the split trees are grown once, at the refit.
Nothing crosses the cut for the search but the labels' owner's own work: the pooled twin is a training-time shortcut
*of the label party's choice of settings*, so it needs every party's columns in one place and is for notebooks and
benchmarks; between organizations, name the trees' parameters (``[boosting]`` of the party config).

``refit=True`` (default) then trains both parts again on *every* row of ``views`` (the bag exactly as
``SplitBag(networks, **params).fit(views)``, the trees with their chosen parameters and no rows held out, the kept
number of trees scaled by the rows' ratio) and keeps the weight: every row trains the final models, at twice the
training time. ``refit=False`` keeps the parts trained on the rest.

``mode="centralized"``: the same ensemble trained in one place (the networks as ``SplitClassifier(mode=
"centralized")``, the trees as the pooled twin): equal to the split ensemble on the same rows and seeds.

Example:
    >>> import numpy as np, pandas as pd, warnings
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(400)]
    >>> x, age = rng.normal(size=400), rng.normal(size=400)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": (x + age > 0).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1]})}
    >>> ens = SplitEnsemble(networks=1, trees={"n_estimators": 3, "max_depth": 2}, mode="centralized", epochs=2,
    ...                     refit=False)
    >>> ens = ens.fit(views)
    >>> ens.predict_proba(views).shape, 0.0 <= ens.weight_ <= 1.0, ens.evaluate(views)["auc"] > 0.8
    ((400, 2), True, True)
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from vsplit.bagging import SplitBag
from vsplit.boosting_estimator import SplitBoostClassifier
from vsplit.errors import ConfigError
from vsplit.models.seeds import derive_seed
from vsplit.pooled_trees import PooledBoostClassifier
from vsplit.weight_rules import WEIGHT_RULES, best_weight, one_se_weight

__all__ = ["TREE_GRID", "WEIGHTS", "WEIGHT_RULES", "SplitEnsemble", "choose_weight", "log_odds",
           "weighted_explanation"]

#: the network's weight candidates (the trees get ``1 - w``)
WEIGHTS = tuple(round(0.05 * k, 2) for k in range(21))
#: ``trees="auto"``: the candidates (with :data:`TREE_FIXED`), each early-stopped on validation rows
TREE_GRID = ({"max_depth": 4, "min_child_weight": 1.0}, {"max_depth": 6, "min_child_weight": 1.0},
             {"max_depth": 4, "min_child_weight": 10.0}, {"max_depth": 6, "min_child_weight": 10.0})
#: ``trees="auto"``: what every candidate shares (trees at most, early stopping on validation AUC)
TREE_FIXED = {"learning_rate": 0.1, "n_estimators": 200, "early_stopping_rounds": 20, "eval_metric": "auc",
              "validation_fraction": 0.1}
#: parameters the networks and the trees share (taken from the networks' parameters)
SHARED = ("label_party", "label", "id_column", "positive_label", "alignment", "random_state")


def weight_seed(random_state: int) -> int:
    """The seed of the ``"one_se"`` rule's bootstrap, from the run's ``random_state`` (the estimator's and a label
    party's alike)."""
    return derive_seed(int(random_state), "ensemble", "weight rule") % 2**31


def log_odds(p: np.ndarray) -> np.ndarray:
    """``log(p / (1 - p))``, clipped away from 0 and 1 (NaN stays NaN).

    Example:
        >>> log_odds(np.array([0.5, 0.75])).round(4).tolist()
        [0.0, 1.0986]
    """
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def choose_weight(y: np.ndarray, networks: np.ndarray, trees: np.ndarray, weights: tuple[float, ...] = WEIGHTS,
                  *, rule: str = "best", seed: int = 0) -> tuple[float, dict[float, float]]:
    """The weight of ``weights`` for the combination ``w * networks + (1 - w) * trees`` (log-odds) on ``y``, and
    every weight's AUC there. ``rule``: ``"best"``, the best AUC (ties go to the weight nearest 0.5); ``"one_se"``,
    the weight nearest 0.5 within one standard error of the best (:func:`vsplit.weight_rules.one_se_weight`, its
    bootstrap seeded by ``seed``).

    Example:
        >>> y = np.array([0, 0, 1, 1]); good = np.array([-1.0, -0.5, 0.5, 1.0])
        >>> choose_weight(y, good, -good)[0]  # every w above 0.5 ranks perfectly: the nearest to 0.5 wins
        0.55
    """
    from sklearn.metrics import roc_auc_score

    if rule not in WEIGHT_RULES:
        raise ConfigError(f"ensemble weight rule {rule!r}: use one of {', '.join(WEIGHT_RULES)}")
    scores = {float(w): float(roc_auc_score(y, w * networks + (1 - w) * trees)) for w in weights}
    if rule == "one_se":
        return one_se_weight(y, networks, trees, scores, seed=seed), scores
    return best_weight(scores), scores


class SplitEnsemble:
    """A :class:`~vsplit.bagging.SplitBag` and vertical trees, combined by a weight chosen on set-aside rows.

    Args:
        networks: networks of the bag (at least 1).
        trees: :class:`~vsplit.boosting_estimator.SplitBoostClassifier` parameters (the shared ones, :data:`SHARED`,
            come from ``params``), or ``"auto"``: chosen on validation rows (above).
        weight_fraction: the label party's rows set aside to choose the weight, in (0, 1).
        weight_rule: how the weight is chosen there (:func:`choose_weight`): ``"best"``, the best AUC, or
            ``"one_se"``, the weight nearest 0.5 within one standard error of it.
        mode: ``"split"`` (default) or ``"centralized"`` (the same ensemble trained in one place).
        refit: after choosing the weight, train both parts again on every row (above).
        order_categories: let the trees order each categorical column's codes by the label party's rate
            (:class:`~vsplit.boosting_estimator.SplitBoostClassifier`'s ``order_categories``; a partner learns that
            order of its categories): every ``trees="auto"`` candidate orders them, a ``trees`` dict without the
            key gets this value. Default off. (Choosing between ordered and unordered trees on validation rows did
            worse than always ordering: benchmarks/results-ordered-categories.json, docs/boosting.md.)
        **params: :class:`~vsplit.estimator.SplitClassifier` parameters of every network (``random_state`` seeds
            the set-aside rows, the networks and the trees).

    Attributes (after ``fit``):
        bag_, trees_: the fitted networks and trees; ``trees_params_``: the trees' parameters (``"auto"``: the
        chosen ones, with the kept number of trees; what another ensemble passes as ``trees`` to train the same),
        ``refit_trees_params_``: (``refit``) those of the refitted trees; ``weight_``: the networks' weight;
        ``weight_scores_``: each weight's AUC on the set-aside rows; ``validation_auc_``: the networks', the trees'
        and the ensemble's AUC there; ``fit_seconds_``: the networks', the trees' (search included), the refit's
        networks and trees (``refit_networks``, ``refit_trees``) and the total; ``classes_``.
    """

    def __init__(self, *, networks: int = 5, trees: Mapping[str, Any] | str = "auto", weight_fraction: float = 0.1,
                 weight_rule: str = "best", mode: str = "split", refit: bool = True, order_categories: bool = False,
                 **params: Any) -> None:
        if trees != "auto" and not isinstance(trees, Mapping):
            raise ConfigError(f"SplitEnsemble trees must be 'auto' or a dict of SplitBoostClassifier parameters, "
                              f"got {trees!r}")
        if not 0 < weight_fraction < 1:
            raise ConfigError(f"SplitEnsemble weight_fraction must be in (0, 1), got {weight_fraction!r}")
        if weight_rule not in WEIGHT_RULES:
            raise ConfigError(f"SplitEnsemble weight_rule must be one of {', '.join(WEIGHT_RULES)}, got "
                              f"{weight_rule!r}")
        if mode not in ("split", "centralized"):
            raise ConfigError(f"SplitEnsemble mode must be 'split' or 'centralized', got {mode!r}")
        self.networks = networks
        self.trees = trees if trees == "auto" else dict(trees)
        self.weight_fraction = weight_fraction
        self.weight_rule = weight_rule
        self.mode = mode
        self.refit = refit
        self.order_categories = order_categories
        self.params = params

    # -- scikit-learn's parameter protocol --------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Every constructor parameter (the networks' ones flattened in)."""
        return {"networks": self.networks, "trees": self.trees, "weight_fraction": self.weight_fraction,
                "weight_rule": self.weight_rule, "mode": self.mode, "refit": self.refit,
                "order_categories": self.order_categories, **self.params}

    def set_params(self, **changes: Any) -> SplitEnsemble:
        """Change parameters (as :meth:`get_params` names them); returns the ensemble."""
        self.__init__(**{**self.get_params(), **changes})  # type: ignore[misc]
        return self

    # -- training ---------------------------------------------------------------------------------------------------
    def fit(self, views: Mapping[str, pd.DataFrame]) -> SplitEnsemble:
        """Train the networks and the trees on all but the set-aside rows, then choose the weight on those."""
        started = time.perf_counter()
        shared = self._shared()
        fit_views, held = self.set_aside(views)
        self.bag_ = SplitBag(networks=self.networks, **{**self.params, "mode": self.mode}).fit(fit_views)
        nets_done = time.perf_counter()
        tree_class = SplitBoostClassifier if self.mode == "split" else PooledBoostClassifier
        if self.trees == "auto":
            self.trees_params_, twin = self._choose_trees(fit_views)
        else:
            self.trees_params_, twin = {"order_categories": self.order_categories, **self.trees}, None
        if twin is not None and self.refit:
            # the first-stage trees only score the set-aside rows, and the winning candidate IS them (the same rows,
            # validation rows and seeds: equal trees, tests/test_ensemble.py); the refit grows the kept trees split
            self.trees_ = twin
        else:
            self.trees_ = tree_class(**shared, **self.trees_params_).fit(fit_views)
        self.classes_ = self.trees_.classes_
        y, nets, trees, known = self._parts(held)
        self.weight_, self.weight_scores_ = choose_weight(y[known], nets[known], trees[known], rule=self.weight_rule,
                                                          seed=weight_seed(shared["random_state"]))
        combined = self.weight_ * nets[known] + (1 - self.weight_) * trees[known]
        from sklearn.metrics import roc_auc_score

        self.validation_auc_ = {"networks": roc_auc_score(y[known], nets[known]),
                                "trees": roc_auc_score(y[known], trees[known]),
                                "ensemble": roc_auc_score(y[known], combined), "rows": int(known.sum())}
        chosen = time.perf_counter()
        self.fit_seconds_ = {"networks": nets_done - started, "trees": chosen - nets_done}
        if self.refit:
            self.bag_ = SplitBag(networks=self.networks, **{**self.params, "mode": self.mode}).fit(views)
            refit_nets = time.perf_counter()
            self.refit_trees_params_ = self._refit_trees()
            self.trees_ = tree_class(**shared, **self.refit_trees_params_).fit(views)
            self.fit_seconds_.update(refit_networks=refit_nets - chosen, refit_trees=time.perf_counter() - refit_nets)
        self.fit_seconds_["total"] = time.perf_counter() - started
        return self

    def set_aside(self, views: Mapping[str, pd.DataFrame]) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
        """``views`` cut as :meth:`fit` cuts them: (the rows both parts train on, the rows the weight is chosen on),
        seeded by ``random_state`` (:func:`vsplit.tune.rows.validation_views`)."""
        from vsplit.tune.rows import validation_views

        shared = self._shared()
        return validation_views(views, label_party=shared["label_party"], label=shared["label"],
                                fraction=self.weight_fraction,
                                seed=derive_seed(shared["random_state"], "ensemble", "weight") % 2**31)

    def _shared(self) -> dict[str, Any]:
        defaults = {"label_party": "bank", "label": "y", "id_column": "customer_id", "positive_label": None,
                    "alignment": "psi", "random_state": 0}
        return {k: self.params.get(k, v) for k, v in defaults.items()}

    def _refit_trees(self) -> dict[str, Any]:
        """The trees' parameters for every row: no early stopping (no rows held out), the kept trees scaled by the
        rows' ratio (the kept count was chosen on the rows left after the set-aside and the trees' validation rows)."""
        params = dict(self.trees_params_)
        rows = (1 - self.weight_fraction) * (1 - (params.get("validation_fraction", 0.1)
                                                  if params.get("early_stopping_rounds") else 0.0))
        params.update(n_estimators=max(1, round(len(self.trees_.model_.trees) / rows)), early_stopping_rounds=None)
        return params

    def _choose_trees(self, views: Mapping[str, pd.DataFrame]) -> tuple[dict[str, Any], PooledBoostClassifier]:
        """The best of :data:`TREE_GRID` by the pooled twin's validation AUC, with its kept number of trees, and that
        twin (its kept trees are the ones the split trees grow with these parameters on ``views``)."""
        best: tuple[float, dict[str, Any], PooledBoostClassifier] | None = None
        for candidate in ({**c, "order_categories": self.order_categories} for c in TREE_GRID):
            twin = PooledBoostClassifier(**self._shared(), **TREE_FIXED, **candidate).fit(views)
            auc = max(twin.evals_result_["validation"]["auc"])
            if best is None or auc > best[0]:
                # the same validation rows and early stopping: the split trees keep exactly these trees
                best = (auc, {**TREE_FIXED, **candidate, "n_estimators": twin.best_iteration_ + 1}, twin)
        assert best is not None
        return best[1], best[2]

    # -- scoring ----------------------------------------------------------------------------------------------------
    def _parts(self, views: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Labels (0/1), the networks' mean log-odds, the trees' margin and which rows are known to all, in the label
        party's order."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # unknown customers: NaN, reported by predict_proba
            nets = np.mean([log_odds(clf.predict_proba(views)[:, 1]) for clf in self.bag_.estimators_], axis=0)
            y, p, known = self.trees_._targets(views)
        return y, nets, log_odds(p), known & np.isfinite(nets)

    def decision_function(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """The ensemble's log-odds of each of the label party's rows (NaN where it cannot be scored)."""
        _, nets, trees, known = self._parts(views)
        out = self.weight_ * nets + (1 - self.weight_) * trees
        out[~known] = np.nan
        return out

    def predict_proba(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """Class probabilities ``(n, 2)`` of the label party's rows in its order; NaN (with a warning) for customers
        some partner does not know."""
        z = self.decision_function(views)
        if np.isnan(z).any():
            warnings.warn(f"{int(np.isnan(z).sum())} of {len(z)} customers are unknown to a partner and were not "
                          "scored (NaN)", stacklevel=2)
        p = 1 / (1 + np.exp(-z))
        return np.column_stack([1 - p, p])

    def evaluate(self, views: Mapping[str, pd.DataFrame]) -> dict[str, float]:
        """``auc``, ``ks``, ``accuracy``, ``f1``, ``log_loss`` and ``n_scored`` on the rows every party knows."""
        from vsplit.metrics import binary_metrics

        y, nets, trees, known = self._parts(views)
        z = self.weight_ * nets[known] + (1 - self.weight_) * trees[known]
        metrics = binary_metrics(y[known], 1 / (1 + np.exp(-z)))
        metrics["n_scored"] = int(known.sum())
        return metrics

    def explain(self, views: Mapping[str, pd.DataFrame], **options: Any) -> Any:
        """Per-party contributions of the ensemble's log-odds: ``w / networks`` times each network's
        (:meth:`SplitClassifier.explain <vsplit.estimator.SplitClassifier.explain>`, ``options`` go there) plus
        ``1 - w`` times the trees' (path attribution), on the rows every party knows, in sorted-ID order."""
        parts = [(self.weight_ / len(self.bag_.estimators_), clf.explain(views, **options))
                 for clf in self.bag_.estimators_]
        parts.append((1 - self.weight_, self.trees_.explain(views)))
        return weighted_explanation(parts)


def weighted_explanation(parts: list[tuple[float, Any]]) -> Any:
    """The explanation of a weighted sum of models' log-odds from each model's (``(weight, explanation)`` pairs,
    the last one's rows kept, in sorted-ID order): the same weighted sums of their scores, baselines, and per-column
    and per-party contributions (:meth:`SplitEnsemble.explain`; ``vsplit explain`` of an ensemble run)."""
    from vsplit.explain.explanation import Explanation

    ids = sorted(parts[-1][1].ids)
    score, base = np.zeros(len(ids)), np.zeros(len(ids))
    features, groups = None, None
    for w, e in parts:
        at = pd.Index(e.ids).get_indexer(ids)
        score, base = score + w * np.asarray(e.score)[at], base + w * np.asarray(e.baseline_score)[at]
        f, g = w * e.features.iloc[at].set_axis(ids), w * e.groups.iloc[at].set_axis(ids)
        # a column or partner one model has not (a scorecard's unselected attributes) counts 0 there
        features = f if features is None else features.add(f, fill_value=0.0)
        groups = g if groups is None else groups.add(g, fill_value=0.0)
    return Explanation(label_party=parts[0][1].label_party, ids=ids, score=score, baseline_score=base,
                       features=features, groups=groups, method="ensemble")
