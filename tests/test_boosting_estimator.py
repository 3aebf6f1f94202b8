"""The notebook estimator of vertical boosting (:class:`vsplit.SplitBoostClassifier`): a bank with labels and
two columns, a shop (one text column, and 10 % of the bank's customers unknown to it) and a telco, as three views
whose rows are in different orders. The estimator grows the pooled reference's trees on the rows PSI aligned, its
one-round prediction equals the pooled walk, it clones and evaluates like SplitClassifier, early stopping keeps a
prefix of the pooled trees, the per-party contributions add up to the margin, and a missing sf-heu names the extra.

1024-bit OU keys behind the test-only flag; 400 rows; each fit about 2 s on one core.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.metrics import roc_auc_score
from sklearn.utils import estimator_checks

pytest.importorskip("heu")

from vsplit import SplitBoostClassifier
from vsplit.boosting import BoostParams, fit_pooled
from vsplit.boosting.gains import goes_left
from vsplit.boosting_estimator import _numbers
from vsplit.errors import ConfigError
from vsplit.explain.reasons import reason_codes

pytestmark = [pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning"),
              pytest.mark.filterwarnings("ignore:.* unknown to a partner:UserWarning")]
PARTIES = ("bank", "shop", "telco")
#: scikit-learn's checks that need no fit on 2-D arrays (as tests/test_estimator_api.py runs for SplitClassifier)
PARAMETER_CHECKS = ["check_parameters_default_constructible", "check_no_attributes_set_in_init",
                    "check_get_params_invariance", "check_set_params", "check_estimator_repr",
                    "check_estimators_unfitted", "check_estimator_cloneable",
                    "check_do_not_raise_errors_in_init_or_set_params", "check_mixin_order", "check_valid_tag_types",
                    "check_estimator_tags_renamed"]
SETTINGS = dict(n_estimators=4, max_depth=3, max_bins=8, min_child_weight=0.5, key_bits=1024,
                insecure_small_key_for_tests=True)


def _views(rows: int = 400, seed: int = 3, start: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{start + i}" for i in range(rows)])
    age, debt, spend, calls, late = rng.normal(size=(5, rows))
    segment = rng.choice(["gold", "silver", "none", "x", "y"], size=rows)
    for column in (age, spend, late):
        column[rng.random(rows) < 0.08] = np.nan
    logit = (0.8 * np.nan_to_num(age) + 1.2 * np.nan_to_num(spend) + 0.8 * (segment == "gold")
             - 1.0 * np.nan_to_num(late, nan=1.5))
    y = np.where(rng.random(rows) < 1 / (1 + np.exp(-logit)), "yes", "no")
    known = rng.random(rows) < 0.9
    return {
        "bank": pd.DataFrame({"customer_id": ids, "age": age, "debt": debt, "y": y}),
        "shop": pd.DataFrame({"customer_id": ids, "spend": spend, "segment": segment})[known].iloc[::-1],
        "telco": pd.DataFrame({"customer_id": ids, "calls": calls, "late": late}).sample(frac=1, random_state=1),
    }


@pytest.fixture(scope="module")
def views():
    return _views()


@pytest.fixture(scope="module")
def clf(views):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return SplitBoostClassifier(**SETTINGS).fit(views)


def _codes(clf, views, rows):
    """Each party's codes of ``rows`` (its own row indices), from the estimator's own bins and categories."""
    out = {}
    for name in PARTIES:
        table = views[name][clf.party_feature_names_in_[name]]
        out[name] = clf.bins_[name].transform(_numbers(table, clf.encoders_[name])[rows[name]])
    return out


def _pooled(clf, views, *, trees):
    codes = _codes(clf, views, clf.rows_)
    labels = (views["bank"]["y"].to_numpy()[clf.rows_["bank"]] == "yes").astype(float)
    params = BoostParams(trees=trees, max_depth=clf.max_depth, learning_rate=clf.learning_rate,
                         min_child_weight=clf.min_child_weight)
    return fit_pooled([codes[n] for n in PARTIES], labels, widths=[clf.bins_[n].width for n in PARTIES],
                      params=params)


def _same_trees(ours, theirs):
    for mine, pooled in zip(ours, theirs, strict=True):
        assert {n: s.key() for n, s in mine.splits.items()} == {n: s.key() for n, s in pooled.splits.items()}
        assert {n: s.record for n, s in mine.splits.items()} == {n: s.record for n, s in pooled.splits.items()}
        assert mine.leaves.keys() == pooled.leaves.keys()
        assert max(abs(mine.leaves[n] - pooled.leaves[n]) for n in mine.leaves) <= 1e-6


def _pooled_decisions(pooled, codes):
    splits = [s for tree in pooled.trees for s in tree.splits.values() if s.party]
    bits = {k: np.zeros((len(codes["bank"]), sum(s.party == k for s in splits)), np.uint8) for k in (1, 2)}
    for s in splits:
        bits[s.party][:, s.record] = goes_left(codes[PARTIES[s.party]][:, s.column], bin=s.bin,
                                               missing_left=s.missing_left, width=pooled.widths[s.party])
    return bits


def test_estimator_grows_the_pooled_trees_on_the_rows_psi_aligned(clf, views):
    ids = {n: views[n]["customer_id"].to_numpy()[clf.rows_[n]] for n in PARTIES}
    assert (ids["bank"] == ids["shop"]).all() and (ids["bank"] == ids["telco"]).all()
    assert clf.n_aligned_ == len(set(views["shop"]["customer_id"])) < len(views["bank"])
    pooled = _pooled(clf, views, trees=SETTINGS["n_estimators"])
    assert len(clf.model_.trees) == SETTINGS["n_estimators"]
    _same_trees(clf.model_.trees, pooled.trees)
    assert {s.party for t in clf.model_.trees for s in t.splits.values()} == {0, 1, 2}, "every party should win"
    assert clf.encoders_["shop"] == {"segment": ["gold", "none", "silver", "x", "y"]}


def test_predict_proba_equals_the_pooled_walk_and_unknown_customers_are_nan(clf, views):
    fresh = _views(rows=150, seed=11, start=5000)
    with pytest.warns(UserWarning, match="unknown to a partner"):
        proba = clf.predict_proba(fresh)
    bank_ids = fresh["bank"]["customer_id"].to_numpy()
    known = np.isin(bank_ids, fresh["shop"]["customer_id"])
    assert proba.shape == (150, 2) and np.isnan(proba[~known]).all() and not np.isnan(proba[known]).any()
    position = {n: {v: i for i, v in enumerate(fresh[n]["customer_id"])} for n in PARTIES}
    rows = {n: np.array([position[n][v] for v in bank_ids[known]]) for n in PARTIES}
    codes = _codes(clf, fresh, rows)
    pooled = _pooled(clf, views, trees=SETTINGS["n_estimators"])
    walked = pooled.predict_proba(own_codes=codes["bank"], decisions=_pooled_decisions(pooled, codes))
    np.testing.assert_allclose(proba[known, 1], walked, rtol=0, atol=1e-6)
    np.testing.assert_allclose(proba[known].sum(axis=1), 1.0)
    labels = clf.predict(fresh)
    assert set(labels[known]) <= {"no", "yes"} and all(v is None for v in labels[~known])


@pytest.mark.parametrize("name", PARAMETER_CHECKS)
def test_scikit_learn_parameter_checks_pass(name):
    check = getattr(estimator_checks, name, None)
    if check is None:
        pytest.skip(f"this scikit-learn has no {name}")
    check("SplitBoostClassifier", SplitBoostClassifier())


def test_get_params_and_clone_round_trip_and_a_clone_refits_the_same_model(clf, views):
    copy = clone(clf)
    assert copy.get_params() == clf.get_params() and not hasattr(copy, "model_")
    assert copy.set_params(n_estimators=7).n_estimators == 7 and clf.n_estimators == SETTINGS["n_estimators"]
    again = clone(clf)
    params, before = again.get_params(), set(vars(again))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert again.fit(views) is again
    added = {a for a in set(vars(again)) - before if not a.startswith("_")}
    assert again.get_params() == params and added and all(a.endswith("_") for a in added), sorted(added)
    _same_trees(again.model_.trees, clf.model_.trees)
    np.testing.assert_array_equal(again.predict_proba(views), clf.predict_proba(views))


def test_evaluate_reports_the_metrics_on_the_customers_every_party_knows(clf, views):
    metrics = clf.evaluate(views)
    assert set(metrics) == {"auc", "ks", "accuracy", "f1", "log_loss", "n_scored"}
    p = clf.predict_proba(views)[:, 1]
    known = ~np.isnan(p)
    y = (views["bank"]["y"].to_numpy() == "yes").astype(int)
    assert metrics["n_scored"] == int(known.sum()) == clf.n_aligned_
    assert metrics["auc"] == pytest.approx(roc_auc_score(y[known], p[known]))
    assert metrics["auc"] > 0.75 and 0 < metrics["ks"] <= 1
    assert clf.score(views) == pytest.approx(metrics["accuracy"])
    assert clf.classes_.tolist() == ["no", "yes"]


def test_per_party_contributions_add_up_to_the_margin_and_name_the_parties_costing_a_decline(clf, views):
    e = clf.explain(views)
    p = clf.predict_proba(views)[:, 1]
    bank_ids = views["bank"]["customer_id"].to_numpy()
    order = {v: i for i, v in enumerate(bank_ids)}
    margins = np.log(p / (1 - p))[[order[i] for i in e.ids]]
    np.testing.assert_allclose(e.score, margins, rtol=0, atol=1e-9)
    assert e.completeness_error().max() <= 1e-12
    table = e.parties()
    np.testing.assert_allclose(table[["baseline", "bank", "shop", "telco"]].sum(axis=1), table["margin"],
                               rtol=0, atol=1e-12)
    assert list(e.features.columns) == ["age", "debt"] and list(e.groups.columns) == ["shop", "telco"]
    assert (table[["bank", "shop", "telco"]].abs().max() > 0.05).all(), "every party's splits move some score"
    # the baseline is the base margin plus each tree's root value: one number for every row
    assert np.ptp(e.baseline_score) == 0 and len(clf.node_values_) == len(clf.model_.trees)
    reasons = reason_codes(e.by_party(), n=3, decline_when="low")
    assert len(reasons) == int((e.score < 0).sum()) > 0
    first = reasons.iloc[0]
    row = table.loc[first["id"], ["bank", "shop", "telco"]]
    assert first["reason_1"].removeprefix("party:") == row.idxmin() and first["contribution_1"] == row.min() < 0
    assert "path attribution" in e.method_text()


def test_early_stopping_keeps_a_prefix_of_the_pooled_trees_up_to_the_best_validation_score(views):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        clf = SplitBoostClassifier(**{**SETTINGS, "n_estimators": 10, "learning_rate": 0.5},
                                   early_stopping_rounds=2, validation_fraction=0.3).fit(views)
    scores = clf.evals_result_["validation"]["logloss"]
    assert clf.best_iteration_ == int(np.argmin(scores)) and len(scores) == clf.best_iteration_ + 3 < 10
    assert len(clf.model_.trees) == clf.best_iteration_ + 1
    assert len(clf.rows_["bank"]) + len(clf.validation_rows_["bank"]) == clf.n_aligned_
    assert not set(clf.rows_["bank"]) & set(clf.validation_rows_["bank"])
    _same_trees(clf.model_.trees, _pooled(clf, views, trees=10).trees[: len(clf.model_.trees)])
    assert clf.evaluate(views)["n_scored"] == clf.n_aligned_  # the partners' kept records match the kept trees
    assert clf.explain(views).completeness_error().max() <= 1e-12


def test_a_missing_sf_heu_names_the_extra_before_any_work(views, monkeypatch):
    monkeypatch.setitem(sys.modules, "heu", None)  # `import heu` now raises ImportError, as without the wheel
    with pytest.raises(ConfigError, match=r"pip install 'vsplit\[he\]'"):
        SplitBoostClassifier(**SETTINGS).fit(views)
