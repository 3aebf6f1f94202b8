"""What a model validator reads: reason codes, calibration, the stability index and the model card."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_explain import make_views

from vsplit.errors import ConfigError
from vsplit.estimator import SplitClassifier
from vsplit.explain.calibration import Calibrator, expected_calibration_error, fit_from_predictions
from vsplit.explain.card import model_card
from vsplit.explain.reasons import reason_codes, reasons_json, write_reasons
from vsplit.models.recipe import PLAIN
from vsplit.monitor.stability import band, population_stability
from vsplit.monitor.views import split_stability
from vsplit.report.card import write_model_card

TEXTS = {"age": "age of the applicant", "job": "occupation", "shop": "purchase history held by {party}"}


@pytest.fixture(scope="module")
def views():
    return make_views(n=600, seed=1)


def subset(views, start: int, stop: int):
    """The customers of the bank's rows ``start:stop``, in every party's view."""
    keep = set(views["bank"]["customer_id"].iloc[start:stop])
    return {n: v[v["customer_id"].isin(keep)].reset_index(drop=True) for n, v in views.items()}


def _reasons(views, seed: int) -> pd.DataFrame:
    clf = SplitClassifier(epochs=3, random_state=seed, alignment="join", candidates="network").fit(views)
    return reason_codes(clf.explain(views, steps=16), n=3, texts=TEXTS, threshold=0.5)


def test_reason_codes_are_deterministic_for_a_seed_and_say_which_partner(views, tmp_path):
    first, again, other = _reasons(views, 3), _reasons(views, 3), _reasons(views, 4)
    pd.testing.assert_frame_equal(first, again)
    assert not first.equals(other)  # another seed, another model
    assert len(first) and first["declined"].all() and (first["probability"] >= 0.5).all()
    texts = set(first[["text_1", "text_2", "text_3"]].to_numpy().ravel()) - {""}
    assert texts <= {"age of the applicant", "occupation", "purchase history held by shop"}
    assert "purchase history held by shop" in texts  # the partner's group is a reason, in its configured words
    given = first[first["reason_1"] != ""]  # a row declined at the baseline's own score may have no reason
    assert len(given) > len(first) / 2 and (given["contribution_1"] > 0).all()
    assert (given["contribution_1"] >= given["contribution_2"].fillna(0)).all()
    csv_path, json_path = write_reasons(first, tmp_path)
    records = json.loads(json_path.read_text())
    assert records == reasons_json(first) and len(pd.read_csv(csv_path)) == len(records)
    assert [len(r["reasons"]) for r in records] == (first[["reason_1", "reason_2", "reason_3"]] != "").sum(
        axis=1).tolist()


def test_reasons_for_a_low_score_decline_are_the_inputs_that_pushed_it_down(views):
    clf = SplitClassifier(epochs=3, random_state=0, alignment="join", candidates="network").fit(views)
    e = clf.explain(views, steps=16)
    low = reason_codes(e, n=2, decline_when="low", threshold=0.5)
    assert (low["probability"] < 0.5).all() and (low["contribution_1"].dropna() < 0).all()
    assert low["contribution_1"].notna().sum() > len(low) / 2
    with pytest.raises(ConfigError, match="decline_when"):
        reason_codes(e, decline_when="sideways")


def test_calibration_lowers_the_ece_of_a_deliberately_overconfident_model(views):
    train, valid, test = subset(views, 0, 300), subset(views, 300, 450), subset(views, 450, 600)
    # the plain network: 300 rows are too few for the recipe's dropout-regularised fit to be overconfident
    clf = SplitClassifier(**{**PLAIN, "epochs": 4}, random_state=0, alignment="join", candidates="network").fit(train)
    with torch.no_grad():  # overconfident: every log-odds times 5
        last = [m for m in clf.modules_["top"].modules() if isinstance(m, torch.nn.Linear)][-1]
        last.weight.mul_(5)
        last.bias.mul_(5)
    y = (test["bank"].set_index("customer_id")["y"]).loc[test["bank"]["customer_id"]].to_numpy()
    before = expected_calibration_error(y, clf.predict_proba(test)[:, 1])
    for method in ("temperature", "isotonic"):
        clf.calibrate(valid, method=method)
        after = expected_calibration_error(y, clf.predict_proba(test)[:, 1])
        assert after < before * 0.7, (method, before, after)
    assert clf.calibrator_.method == "isotonic"
    again = Calibrator.from_dict(json.loads(json.dumps(clf.calibrator_.to_dict())))
    p = np.linspace(0.01, 0.99, 7)
    np.testing.assert_allclose(again.apply(p), clf.calibrator_.apply(p))
    clf.calibrator_ = None
    assert expected_calibration_error(y, clf.predict_proba(test)[:, 1]) == pytest.approx(before)


def test_a_calibration_fitted_from_a_prediction_job_matches_the_labels_by_id():
    rng = np.random.default_rng(0)
    ids = [f"c{i}" for i in range(400)]
    truth = rng.uniform(0.05, 0.95, 400)
    y = np.where(rng.random(400) < truth, "yes", "no")
    overconfident = 1 / (1 + np.exp(-4 * np.log(truth / (1 - truth))))
    predictions = pd.DataFrame({"customer_id": ids, "probability": overconfident, "status": "scored"})
    labels = pd.DataFrame({"customer_id": ids[::-1], "y": y[::-1]})
    cal = fit_from_predictions(predictions, labels, id_column="customer_id", label="y", positive_label="yes")
    assert 3 < cal.temperature < 5
    with pytest.raises(ConfigError, match="no ID"):
        fit_from_predictions(predictions, labels.assign(customer_id="x"), id_column="customer_id", label="y",
                             positive_label="yes")


def test_stability_is_zero_for_identical_data_and_a_shift_past_the_band_for_a_shifted_column(views):
    rng = np.random.default_rng(0)
    x = rng.normal(size=3000)
    assert population_stability(x, x) == 0.0
    assert population_stability(x, x + 1.0) > 0.25 and band(population_stability(x, x + 1.0)) == "shift"
    assert population_stability(x, rng.normal(size=3000)) < 0.1
    jobs = pd.Series(["a"] * 50 + ["b"] * 50)
    assert population_stability(jobs, jobs) == 0.0
    assert population_stability(jobs, pd.Series(["a"] * 90 + ["b"] * 10)) > 0.25

    clf = SplitClassifier(epochs=2, random_state=0, alignment="join", embedding_width=4,
                          candidates="network").fit(views)
    same = split_stability(clf, views, views)
    assert (same["stability"] == 0).all() and set(same["kind"]) == {"feature", "embedding", "score"}
    assert len(same[(same["party"] == "shop") & (same["kind"] == "embedding")]) == 4
    shifted = {**views, "bank": views["bank"].assign(age=views["bank"]["age"] + 2.0)}
    moved = split_stability(clf, views, shifted).set_index(["party", "name"])
    assert moved.loc[("bank", "age"), "stability"] > 0.25 and moved.loc[("bank", "age"), "band"] == "shift"
    assert moved.loc[("bank", "job"), "stability"] == 0 and (moved.loc["shop", "stability"] == 0).all()
    assert moved.xs("bank")[lambda t: t["kind"] == "embedding"]["stability"].max() > 0.1


def test_the_model_card_renders_to_markdown_and_html(views, tmp_path):
    train, test = subset(views, 0, 400), subset(views, 400, 600)
    clf = SplitClassifier(epochs=3, random_state=0, alignment="join", candidates="network").fit(train)
    e = clf.explain(test, steps=16)
    card = model_card(clf, train, test, explanation=e, fairness_column="job", draws=50,
                      privacy={"defenses": ["noise"], "leakage": {"label leakage AUC": 0.52}})
    markdown, html = write_model_card(tmp_path, card)
    text = markdown.read_text()
    for section in ("## Data", "## Topology and cut", "## Training recipe and seeds", "## Metrics",
                    "## Calibration", "## What drives the score", "## Fairness slices: job", "## Privacy",
                    "## Known limits"):
        assert section in text, section
    assert "| shop |" in text and "party" not in card["importance"] and "shop" in card["importance"]
    assert "| clerk |" in text and "label leakage AUC: 0.520" in text
    lo, hi = card["metrics"]["auc_interval"]
    assert lo <= card["metrics"]["auc"] <= hi
    page = html.read_text()
    assert html.name == "model_card.html" and "<table>" in page and page.count("data:image/png;base64,") == 2
    assert not (tmp_path / "report.html").exists()
    with pytest.raises(ConfigError, match="fairness_column"):
        model_card(clf, train, test, fairness_column="nope")


def test_vsplit_predict_applies_the_label_partys_calibration_file_when_there_is_one(tmp_path):
    from vsplit.explain.calibration import FILE, calibrated

    proba = np.array([0.1, 0.5, 0.9])
    assert calibrated(tmp_path, proba) is proba  # no file: the scores as they are
    Calibrator(method="temperature", temperature=2.0).save(tmp_path / FILE)
    np.testing.assert_allclose(calibrated(tmp_path, proba), 1 / (1 + np.exp(-np.log(proba / (1 - proba)) / 2)))
    (tmp_path / FILE).write_text('{"method": "magic"}')
    with pytest.raises(ConfigError, match="method must be one of"):
        calibrated(tmp_path, proba)


def test_vsplit_calibrate_writes_the_label_partys_calibration_file(tmp_path):
    from vsplit.cli.main import main
    from vsplit.pilot.prepare import ensure_keys

    ensure_keys(tmp_path, ["bank", "partner"])
    bank = tmp_path / "bank"
    (bank / "data").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    ids = [f"c{i}" for i in range(300)]
    truth = rng.uniform(0.05, 0.95, 300)
    pd.DataFrame({"customer_id": ids, "age": rng.normal(size=300),
                  "y": np.where(rng.random(300) < truth, "yes", "no")}).to_parquet(bank / "data" / "valid.parquet")
    (bank / "data" / "train.parquet").write_bytes((bank / "data" / "valid.parquet").read_bytes())
    config = (Path(__file__).resolve().parents[1] / "parties" / "bank" / "party.toml").read_text()
    (bank / "party.toml").write_text(config.replace('dir = "../../runs"', 'dir = "../runs"')
                                     .replace('test_path = "data/test.parquet"\n', ""))
    overconfident = 1 / (1 + np.exp(-4 * np.log(truth / (1 - truth))))
    pd.DataFrame({"customer_id": ids, "probability": overconfident, "status": "scored"}).to_csv(
        tmp_path / "predictions.csv", index=False)
    assert main(["calibrate", "--config", str(bank / "party.toml"), "--input", str(bank / "data" / "valid.parquet"),
                 "--predictions", str(tmp_path / "predictions.csv")]) == 0
    saved = Calibrator.load(tmp_path / "runs" / "bank-marketing-pilot" / "bank" / "calibration.json")
    assert saved.method == "temperature" and 2.5 < saved.temperature < 6
