"""The bank alone, measured fairly: its best own model (network, logistic regression or, with LightGBM, a booster,
chosen over folds or on its validation rows) is the baseline, the fallback and what the gain is over; near chance it
is flagged; every model is scored on the same customers; and small tables get enough optimizer steps.

One module fixture trains, in this process, a split with ``fallback=True`` on a 600-customer table whose bank column
ranks linearly, the bank's network held to one tiny step size so that its regression must win.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from vsplit.estimator import SplitClassifier
from vsplit.metrics import roc_auc

N, KNOWN = 600, 480


def _views(seed: int = 0, *, noise_labels: bool = False) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = [f"c{i}" for i in range(N)]
    a, b = rng.normal(size=N), rng.normal(size=N)
    job = rng.choice(["clerk", "nurse", "pilot"], size=N)
    signal = 1.5 * a + (job == "pilot") + b
    y = rng.random(N) < (0.5 if noise_labels else 1 / (1 + np.exp(-2 * signal)))
    bank = pd.DataFrame({"customer_id": ids, "a": a, "job": job, "y": np.where(y, "yes", "no")})
    partner = pd.DataFrame({"customer_id": ids[:KNOWN], "b": b[:KNOWN]})  # the partner does not know the last 120
    return {"bank": bank, "partner": partner}


@pytest.fixture(scope="module")
def fitted(one_thread) -> tuple[SplitClassifier, dict[str, pd.DataFrame]]:
    views = _views()
    clf = SplitClassifier(epochs=2, lr=1e-7, fallback=True, random_state=0, alignment="join",
                          candidates="network").fit(views)
    return clf, views


def test_the_banks_regression_is_chosen_over_a_network_that_did_not_train_and_scores_the_unknown(fitted):
    from vsplit.app.fallback import LOGISTIC, score_bank_only

    clf, views = fitted
    bank = clf.fallback_
    assert bank.chosen == LOGISTIC and bank.val_auc[LOGISTIC] > bank.val_auc["network"]
    p = clf.predict_proba(views)[:, 1]
    unknown = views["bank"].iloc[KNOWN:]
    assert np.array_equal(p[KNOWN:], score_bank_only(bank, unknown))
    y = (unknown["y"] == "yes").to_numpy().astype(int)
    assert roc_auc(y, p[KNOWN:]) > 0.75  # the regression ranks; the barely moved network would not
    assert "warning" not in bank.describe()


def test_the_chosen_regression_saves_as_arrays_and_loads_to_the_same_scores(fitted, tmp_path):
    from vsplit.app.fallback import load_bank_only, save_bank_only, score_bank_only
    from vsplit.party import LabelParty

    clf, views = fitted
    bank = clf.fallback_
    path = save_bank_only(bank, tmp_path / "fallback.npz", run_id="r")
    with np.load(path, allow_pickle=False) as saved:  # arrays only: no pickle needed to read it
        assert all(saved[k].dtype.kind in "fiubU" for k in saved.files)
    table = views["bank"]

    def build(architecture: dict) -> LabelParty:
        return LabelParty("bank", table, label="y", settings=clf._settings(), seed=0)

    again = load_bank_only(path, build, run_id="r", party="bank")
    assert again.chosen == bank.chosen and again.val_auc == pytest.approx(bank.val_auc)
    assert np.allclose(score_bank_only(again, table), score_bank_only(bank, table), atol=1e-12)


def test_the_regressions_reasons_are_coefficient_times_distance_from_the_reference(fitted):
    clf, views = fitted
    bank = clf.fallback_
    explanation = bank_explanation(bank, views["bank"].iloc[KNOWN:])
    assert list(explanation.features.columns) == ["job", "a"]  # categorical columns first, as prepared
    total = explanation.features.sum(axis=1).to_numpy()
    assert np.allclose(total, explanation.score - explanation.baseline_score)
    from vsplit.explain.reasons import reason_codes

    codes = reason_codes(explanation, n=2, declined_only=False)
    given = set(codes["reason_1"]) - {""}  # a row with nothing pushing towards the decline has no reason
    assert len(codes) == N - KNOWN and given and given <= {"job", "a"}


def bank_explanation(bank, table):
    from vsplit.app.fallback import explain_bank_only

    return explain_bank_only(bank, table)


def test_a_bank_model_near_chance_is_flagged_in_the_report_and_the_console():
    from types import SimpleNamespace

    from vsplit.app.fallback import train_bank_only
    from vsplit.app.session import Schedule
    from vsplit.cli.summary import coverage_summary, train_summary
    from vsplit.party import LabelParty

    party = LabelParty("bank", _views(1, noise_labels=True)["bank"], label="y", seed=0)
    alone = train_bank_only(party, schedule=Schedule(epochs=1), session=b"s" * 16)
    described = alone.describe()
    assert abs(alone.val_auc[described["model"]] - 0.5) <= 0.05 and "within 0.05 of chance" in described["warning"]
    lines = coverage_summary({"coverage": {"all": {"auc": 0.5, "n_scored": 10}}, "bank_model": described})
    assert any(line.startswith("  warning: The bank-alone model") for line in lines)
    result = SimpleNamespace(party="bank", role="label", psi={}, history=[{}], best_epoch=0, seconds={"train": 1.0},
                             comm={}, test={"auc": 0.6, "n_scored": 10},
                             baselines={"label_party_only": {"auc": 0.5, **described}})
    text = train_summary(result, report=None)
    assert f"bank alone ({described['model'].replace('_', ' ')}) 0.5000" in text and "warning:" in text


def test_every_mode_is_evaluated_on_the_customers_every_party_knows(fitted):
    clf, views = fitted
    alone = clf.clone(mode="label_party_only", fallback=False, lr=1e-3, epochs=1, min_steps=0).fit(views)
    shared, everyone = alone.evaluate(views), alone.evaluate(views, customers="all")
    assert shared["n_scored"] == clf.evaluate(views)["n_scored"] == KNOWN
    assert everyone["n_scored"] == N
    assert alone.batch_size_ == 256  # min_steps=0: the batch of 256, not fitted to the rows


def test_a_small_table_gets_enough_optimizer_steps_per_epoch_and_patience(fitted):
    from vsplit.app.session import fitted_batch, fitted_patience

    clf, _ = fitted
    # 480 shared customers, 432 of them training rows: 256 would be 2 steps an epoch; 32 gives 14
    assert clf.batch_size_ == 32 and clf.get_params()["batch_size"] is None
    assert fitted_batch(256, 432, 32) == 256  # a batch size given is used as given
    assert fitted_batch(None, 27_000, 32) == 256 and fitted_patience(5, 106, 32) == 5  # a large table: unchanged
    assert fitted_patience(5, 14, 32) == 23


def test_a_bag_of_bank_alone_networks_is_evaluated_on_the_same_customers(fitted):
    from vsplit.bagging import SplitBag

    _, views = fitted
    bag = SplitBag(networks=2, mode="label_party_only", epochs=1, min_steps=0, random_state=0,
                   alignment="join").fit(views)
    assert bag.evaluate(views)["n_scored"] == KNOWN and bag.evaluate(views, customers="all")["n_scored"] == N


def test_on_a_small_table_the_bank_models_are_compared_over_five_folds_and_the_choice_is_saved(fitted, tmp_path):
    """The regression's figure is the mean test AUC of its five fold fits, recomputed here by hand; the network's
    is its own folds' (each trained on the other four, its epoch chosen on validation rows of those)."""
    from sklearn.model_selection import StratifiedKFold

    from vsplit.app.fallback import BOOSTER, BY_FOLDS, FOLDS, LOGISTIC, _rows, load_bank_only, save_bank_only
    from vsplit.data.tables import all_ids
    from vsplit.models.booster import BoosterModel
    from vsplit.models.logistic import LogisticModel
    from vsplit.models.seeds import derive_seed
    from vsplit.party import LabelParty

    clf, views = fitted
    bank = clf.fallback_
    assert bank.chosen_by == BY_FOLDS and set(bank.val_auc) == {"network", LOGISTIC, BOOSTER}
    party = bank.party
    own = np.argsort(all_ids(party.ids), kind="stable")
    y = party.labels.numpy().astype(np.int64)
    splitter = StratifiedKFold(FOLDS, shuffle=True, random_state=derive_seed(0, "bank-only folds") % 2**32)
    aucs, boosted = [], []
    cards = party.preprocessor.cardinalities
    for fit, held in splitter.split(own, y[own]):
        model = LogisticModel.fit(_rows(party, own[fit], 0), y[own[fit]], cardinalities=cards)
        aucs.append(roc_auc(y[own[held]], model.proba(_rows(party, own[held], 0))))
        trees = BoosterModel.fit(_rows(party, own[fit], 0), y[own[fit]], cardinalities=cards,
                                 seed=derive_seed(0, "bank-only booster") % 2**31)
        boosted.append(roc_auc(y[own[held]], trees.proba(_rows(party, own[held], 0))))
    assert bank.val_auc[LOGISTIC] == pytest.approx(float(np.mean(aucs)), abs=1e-12)
    assert bank.val_auc[BOOSTER] == pytest.approx(float(np.mean(boosted)), abs=1e-12)
    assert bank.describe()["chosen_by"] == BY_FOLDS

    path = save_bank_only(bank, tmp_path / "fallback.npz", run_id="r")
    again = load_bank_only(path, lambda _: LabelParty("bank", views["bank"], label="y", settings=clf._settings(),
                                                       seed=0), run_id="r", party="bank")
    assert again.chosen_by == BY_FOLDS
    unknown = views["bank"].iloc[KNOWN:]
    np.testing.assert_array_equal(again.booster.proba(again.party.prepare(unknown)[1]),
                                  bank.booster.proba(bank.party.prepare(unknown)[1]))  # kept as LightGBM's text


def test_where_trees_rank_best_the_bank_booster_is_chosen_scores_and_explains(one_thread, tmp_path):
    """A bank column that ranks only away from its middle (far from 0 on either side): the regression cannot, the
    network is held still, the booster is chosen over the folds; it scores the customers the partner does not know,
    saves and loads, and its reasons (TreeSHAP in log-odds) add up to each score."""
    from vsplit.app.fallback import BOOSTER, explain_bank_only, load_bank_only, save_bank_only, score_bank_only
    from vsplit.party import LabelParty

    rng = np.random.default_rng(1)
    views = _views()
    a, c = rng.normal(size=N), rng.normal(size=N)
    y = rng.random(N) < 1 / (1 + np.exp(-3 * (np.abs(a) - 0.8)))
    views["bank"] = views["bank"].assign(a=a, c=c, y=np.where(y, "yes", "no"))
    clf = SplitClassifier(epochs=2, lr=1e-7, fallback=True, random_state=0, alignment="join",
                          candidates="network").fit(views)
    bank = clf.fallback_
    assert bank.chosen == BOOSTER and bank.val_auc[BOOSTER] == max(bank.val_auc.values()) > 0.7
    unknown = views["bank"].iloc[KNOWN:]
    p = clf.predict_proba(views)[KNOWN:, 1]
    np.testing.assert_array_equal(p, score_bank_only(bank, unknown))
    assert roc_auc(y[KNOWN:].astype(int), p) > 0.7
    path = save_bank_only(bank, tmp_path / "fallback.npz", run_id="r")
    again = load_bank_only(path, lambda _: LabelParty("bank", views["bank"], label="y", settings=clf._settings(),
                                                       seed=0), run_id="r", party="bank")
    assert again.chosen == BOOSTER
    np.testing.assert_array_equal(score_bank_only(again, unknown), p)
    explanation = explain_bank_only(again, unknown)
    assert np.abs(explanation.completeness_error()).max() < 1e-6 and {"a", "c"} <= set(explanation.features)


def test_a_table_above_the_cross_validation_size_is_judged_on_validation_rows(monkeypatch, one_thread):
    import vsplit.app.fallback as fallback

    monkeypatch.setattr(fallback, "CV_ROWS", 100)
    clf = SplitClassifier(epochs=2, lr=1e-7, fallback=True, random_state=0, alignment="join",
                          candidates="network").fit(_views())
    assert clf.fallback_.chosen_by == fallback.BY_VALIDATION
