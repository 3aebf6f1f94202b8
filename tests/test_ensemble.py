"""The split ensemble of networks and vertical trees (vsplit.ensemble): its weight is chosen on rows set aside from the
training rows (poisoning the test labels leaves it unchanged; poisoning the set-aside rows' labels moves it), the split
ensemble equals the same ensemble trained in one place, the pooled twin grows the split trees, and the per-party
contributions of the combination add up to its log-odds."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from vsplit.ensemble import SplitEnsemble

TREES = {"n_estimators": 6, "max_depth": 3, "learning_rate": 0.3, "key_bits": 1024,
         "insecure_small_key_for_tests": True}
NETWORK = {"label_party": "bank", "label": "y", "id_column": "customer_id", "positive_label": "yes", "epochs": 3,
           "random_state": 4}


def _views(rows: int = 400, seed: int = 3, start: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{start + i}" for i in range(rows)])
    age, debt, spend, late = rng.normal(size=(4, rows))
    segment = rng.choice(["gold", "silver", "none"], size=rows)
    logit = 0.8 * age + 1.2 * spend * (segment == "gold") + np.sin(3 * late) - 0.5 * debt ** 2
    y = np.where(rng.random(rows) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return {"bank": pd.DataFrame({"customer_id": ids, "age": age, "debt": debt, "y": y}),
            "shop": pd.DataFrame({"customer_id": ids, "spend": spend, "segment": segment, "late": late}).iloc[::-1]}


def _fit(views, **changes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return SplitEnsemble(**{"networks": 1, "trees": TREES, "mode": "centralized", "refit": False, **NETWORK,
                                **changes}).fit(views)


@pytest.fixture(scope="module")
def train():
    return _views()


@pytest.fixture(scope="module")
def pooled(train):
    return _fit(train)


@pytest.fixture(scope="module")
def split(train):
    return _fit(train, mode="split")


def test_split_ensemble_equals_the_same_ensemble_trained_in_one_place(split, pooled, train):
    test = _views(rows=300, seed=9, start=10_000)
    assert split.weight_ == pooled.weight_
    assert split.weight_scores_ == pytest.approx(pooled.weight_scores_, abs=1e-9)
    for mine, theirs in zip(split.trees_.model_.trees, pooled.trees_.model_.trees, strict=True):
        assert {n: s.key() for n, s in mine.splits.items()} == {n: s.key() for n, s in theirs.splits.items()}
    np.testing.assert_allclose(split.predict_proba(test), pooled.predict_proba(test), atol=1e-5)
    assert split.evaluate(test)["auc"] == pytest.approx(pooled.evaluate(test)["auc"], abs=1e-6)


def test_the_weight_is_chosen_without_the_test_rows_poisoned_test_labels_leave_it_unchanged():
    """benchmarks/quality.py's path: ``ensembles(data, test, ...)`` fits on ``data.train`` only; flipping every test
    label turns the test AUC upside down, and leaves the weight and its validation scores as they were."""
    from tests.test_quality_table import load_quality

    quality = load_quality()
    train, test = _views(), _views(rows=300, seed=9, start=10_000)
    poisoned = {**test, "bank": test["bank"].assign(y=np.where(test["bank"]["y"] == "yes", "no", "yes"))}
    data = SimpleNamespace(train=train, label_party="bank", label="y", id_column="customer_id", positive_label="yes")
    recipe = {"networks": 1, "epochs": 3}
    runs = []
    for rows in (test, poisoned):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            runs.append(quality.ensembles(data, rows, 4, recipe, trees=TREES, modes=(("pooled", "centralized"),)))
    (clean, dirty), refitted = [r["pooled_ensemble"] for r in runs], runs[0]["centralized"]
    assert clean["weight"] == dirty["weight"]
    assert clean["validation_auc"] == dirty["validation_auc"]
    assert dirty["auc"] == pytest.approx(1 - clean["auc"], abs=1e-9)  # the poison did reach the test scores
    # the benchmark's "centralized" (and "split") is the ensemble's refitted bag: the bag on every training row
    from vsplit.bagging import SplitBag

    bag = SplitBag(networks=1, mode="centralized", label_party="bank", label="y", id_column="customer_id",
                   positive_label="yes", random_state=4, epochs=3, **quality.RUN).fit(train)
    assert refitted["auc"] == pytest.approx(bag.evaluate(test)["auc"], abs=1e-12)


def test_poisoned_set_aside_labels_move_the_weight(pooled, train):
    """The weight does read the set-aside rows' labels (so the test above could fail)."""
    from vsplit.models.seeds import derive_seed
    from vsplit.tune.rows import validation_views

    _, held = validation_views(train, label_party="bank", label="y", fraction=pooled.weight_fraction,
                               seed=derive_seed(NETWORK["random_state"], "ensemble", "weight") % 2**31)
    held_ids = set(held["bank"]["customer_id"])
    bank = train["bank"]
    flipped = bank["customer_id"].isin(held_ids)
    poisoned = {**train, "bank": bank.assign(y=np.where(flipped, np.where(bank["y"] == "yes", "no", "yes"),
                                                        bank["y"]))}
    dirty = _fit(poisoned)
    assert dirty.validation_auc_["ensemble"] != pytest.approx(pooled.validation_auc_["ensemble"], abs=1e-6)
    assert dirty.weight_scores_ != pytest.approx(pooled.weight_scores_, abs=1e-6)


def test_contributions_of_the_combination_add_up_to_its_log_odds(pooled, train):
    e = pooled.explain(train, method="exact")
    z = pd.Series(pooled.decision_function(train), index=train["bank"]["customer_id"]).loc[e.ids].to_numpy()
    np.testing.assert_allclose(e.score, z, atol=1e-4)
    assert float(e.completeness_error().max()) < 1e-3
    assert list(e.groups.columns) == ["shop"] and set(e.features.columns) == {"age", "debt"}


def test_bad_parameters_name_the_fix():
    from vsplit.errors import ConfigError

    with pytest.raises(ConfigError, match="weight_fraction"):
        SplitEnsemble(weight_fraction=1.0)
    with pytest.raises(ConfigError, match="mode must be 'split' or 'centralized'"):
        SplitEnsemble(mode="label_party_only")


@pytest.mark.parametrize("order", [False, True], ids=["codes", "ordered"])
def test_the_pooled_twin_grows_the_split_trees_with_goss_and_early_stopping(train, order):
    from vsplit.boosting_estimator import SplitBoostClassifier
    from vsplit.pooled_trees import PooledBoostClassifier

    settings = {**TREES, "goss_top_rate": 0.3, "goss_other_rate": 0.2, "early_stopping_rounds": 2,
                "label_party": "bank", "label": "y", "positive_label": "yes", "random_state": 5,
                "order_categories": order}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        split, twin = SplitBoostClassifier(**settings).fit(train), PooledBoostClassifier(**settings).fit(train)
    assert split.best_iteration_ == twin.best_iteration_
    for mine, theirs in zip(split.model_.trees, twin.model_.trees, strict=True):
        assert {n: s.key() for n, s in mine.splits.items()} == {n: s.key() for n, s in theirs.splits.items()}
        assert max(abs(mine.leaves[n] - theirs.leaves[n]) for n in mine.leaves) <= 1e-6
    np.testing.assert_allclose(split.predict_proba(train), twin.predict_proba(train), atol=1e-6)


def test_auto_trees_with_order_categories_order_every_candidate(train, monkeypatch):
    import vsplit.ensemble as module
    from vsplit.pooled_trees import PooledBoostClassifier

    grid = ({"max_depth": 2, "min_child_weight": 1.0}, {"max_depth": 3, "min_child_weight": 1.0})
    fixed = {**module.TREE_FIXED, "n_estimators": 30}
    monkeypatch.setattr(module, "TREE_GRID", grid)
    monkeypatch.setattr(module, "TREE_FIXED", fixed)
    ens = SplitEnsemble(networks=1, mode="centralized", order_categories=True, **NETWORK)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        chosen, twin = ens._choose_trees(train)
        twins = [PooledBoostClassifier(**ens._shared(), **fixed, **c, order_categories=True).fit(train) for c in grid]
        unordered, _ = SplitEnsemble(networks=1, **NETWORK)._choose_trees(train)
    scores = [max(t.evals_result_["validation"]["auc"]) for t in twins]
    best = int(scores[1] > scores[0])
    assert chosen == {**fixed, **grid[best], "order_categories": True, "n_estimators": twins[best].best_iteration_ + 1}
    assert len(twin.model_.trees) == chosen["n_estimators"] and twin.max_depth == grid[best]["max_depth"]
    assert unordered["order_categories"] is False  # off by default
    assert SplitEnsemble(networks=1, order_categories=True, **NETWORK).get_params()["order_categories"] is True


def test_auto_trees_score_the_set_aside_rows_with_the_winning_twin_exactly_as_split_trees_grown_there(train,
                                                                                                     monkeypatch):
    """With ``trees="auto"`` and ``refit``, the first-stage trees only choose the weight, and the winning pooled
    candidate stands in for them: the same weight scores, weight, refitted trees and predictions as an ensemble that
    grows those first-stage trees split with the chosen parameters."""
    import vsplit.ensemble as module

    monkeypatch.setattr(module, "TREE_GRID", ({"max_depth": 2, "min_child_weight": 1.0},
                                              {"max_depth": 3, "min_child_weight": 1.0}))
    monkeypatch.setattr(module, "TREE_FIXED", {**module.TREE_FIXED, "n_estimators": 12, "early_stopping_rounds": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        auto = SplitEnsemble(networks=1, mode="split", order_categories=True, **{**NETWORK, "epochs": 1}).fit(train)
        grown = SplitEnsemble(networks=1, mode="split", trees=auto.trees_params_,
                              **{**NETWORK, "epochs": 1}).fit(train)
    assert grown.weight_scores_ == pytest.approx(auto.weight_scores_, abs=1e-9) and grown.weight_ == auto.weight_
    assert grown.refit_trees_params_ == auto.refit_trees_params_
    for mine, theirs in zip(auto.trees_.model_.trees, grown.trees_.model_.trees, strict=True):
        assert {n: s.key() for n, s in mine.splits.items()} == {n: s.key() for n, s in theirs.splits.items()}
    test = _views(rows=200, seed=11, start=20_000)
    np.testing.assert_allclose(auto.predict_proba(test), grown.predict_proba(test), atol=1e-9)


def test_the_one_se_weight_rule_is_the_same_split_and_in_one_place(split, train):
    """``weight_rule="one_se"``: the split ensemble and its pooled twin keep the same weight (the bootstrap is seeded
    by ``random_state``), and the rule sees the same set-aside scores as ``"best"``."""
    split_se, pooled_se = (_fit(train, mode=mode, weight_rule="one_se") for mode in ("split", "centralized"))
    assert split_se.weight_ == pooled_se.weight_
    assert split_se.weight_scores_ == pytest.approx(split.weight_scores_, abs=1e-12)
    assert split_se.get_params()["weight_rule"] == "one_se"
