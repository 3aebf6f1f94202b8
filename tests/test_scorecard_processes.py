"""The scorecard between organizations: a bank and two partners (shop, telco) as three OS processes over mutual TLS,
configured with ``[model] kind = "scorecard"``: PSI, binning across the cut, then training. Each party's
coefficients (and the bank's intercept) equal the pooled run on the WOE matrix of every party's selected attributes
(their saved WOE maps applied to the aligned training rows); ``vsplit predict`` gives the pooled model's
probabilities, and points that add up to them; the bank's model card shows only what each partner shares. telco
sets no test table: it scores the bank's test customers from its training table.

Small tables (the bundled bank sample cut to the bank's first 900 customers), 1024-bit test keys behind the
test-only variable.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from _pilot_support import start, wait_all
from test_boosting_processes import _aligned, _prepare, _tables

from vsplit.config.boosting import SMALL_KEYS_ENV
from vsplit.runtime.checkpoint import load_checkpoint
from vsplit.scorecard import Scaling, ScorecardParams, columns_from_maps, fit_pooled, sigmoid
from vsplit.woe.maps import WoeMap

NAMES = ("bank", "shop", "telco")
PARAMS = ScorecardParams(iterations=6, learning_rate=2.0, l2=0.01)
EXTRA = f"""
[model]
kind = "scorecard"

[woe]
fine_bins = 8
key_bits = 1024
select_min_iv = 0.001

[scorecard]
iterations = {PARAMS.iterations}
learning_rate = {PARAMS.learning_rate}
l2 = {PARAMS.l2}
key_bits = 1024
base_score = 500
"""
RUN = "scorecard-tls"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One run, then a `vsplit predict` job on every party's test table."""
    import test_boosting_processes as boosting

    root = tmp_path_factory.mktemp("scorecard-run")
    mp = pytest.MonkeyPatch()
    mp.setattr(boosting, "EXTRA", EXTRA)
    mp.setenv(SMALL_KEYS_ENV, "1")
    try:
        configs = _prepare(root, RUN)
        shop = configs["shop"]
        shop.write_text(shop.read_text() + "share_names = true\nshare_points = true\n")
        # telco keeps its customers in one table and sets no data.test_path (docs/pilot.md): it scores the bank's
        # test customers from its training table, told by the bank that a test table follows
        telco = root / "telco" / "data"
        both = pd.concat([pd.read_parquet(telco / "train.parquet"), pd.read_parquet(telco / "test.parquet")])
        both.to_parquet(telco / "train.parquet", index=False)
        configs["telco"].write_text(configs["telco"].read_text().replace('test_path = "data/test.parquet"\n', ""))
        assert "test_path" not in configs["telco"].read_text()
        logs = {p: root / f"{p}-train.log" for p in configs}
        procs = {p: start(["train", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
        wait_all(procs, logs, timeout=240)
        logs = {p: root / f"{p}-predict.log" for p in configs}
        procs = {p: start(["predict", "--config", str(c), "--input", str(root / p / "data" / "test.parquet"),
                           "--job", "j1", "--quiet"], log=logs[p]) for p, c in configs.items()}
        wait_all(procs, logs, timeout=120)
    finally:
        mp.undo()
    return root


def _models(root: Path) -> dict[str, dict]:
    return {n: load_checkpoint(root / "runs" / RUN / n / "model.npz", run_id=RUN, party=n) for n in NAMES}


def _woe(root: Path, models: dict[str, dict], split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The pooled WOE matrix of the aligned rows of ``split`` (each party's own saved maps), labels and IDs."""
    tables = _tables(root, split)
    rows = _aligned(tables)
    parts = []
    for n in NAMES:
        maps = [WoeMap.from_state(m) for m in models[n]["maps"]]
        parts.append(columns_from_maps(maps, tables[n].iloc[rows[n]].reset_index(drop=True)).matrix())
    labels = (tables["bank"]["y"].iloc[rows["bank"]].astype(str) == "yes").to_numpy(dtype=float)
    ids = tables["bank"]["customer_id"].astype(str).to_numpy()[rows["bank"]].tolist()
    return np.hstack(parts), labels, ids


def test_three_processes_over_tls_equal_the_pooled_scorecard(trained):
    models = _models(trained)
    assert all(len(models[n]["maps"]) >= 2 for n in NAMES)  # every party trains several attributes
    x, labels, _ = _woe(trained, models, "train")
    coef, intercept = fit_pooled(x, labels, params=PARAMS)
    split = np.concatenate([np.asarray(models[n]["coef"], dtype=float) for n in NAMES])
    assert np.abs(split - coef).max() < 1e-6 and np.abs(coef).min() > 1e-4
    assert abs(float(models["bank"]["intercept"]) - intercept) < 1e-6
    result = json.loads((trained / "runs" / RUN / "bank" / "result.json").read_text())
    assert 0.2 < result["test"]["gini"] <= 1 and result["test"]["n_scored"] > 100


def test_a_partner_without_a_test_table_scores_the_banks_test_customers_from_its_own(trained):
    """telco set no data.test_path: the bank's word after training (vsplit.protocol.then_score) had it score the
    bank's test customers from its training table, so the bank scored every test customer all three know."""
    _, _, ids = _woe(trained, _models(trained), "test")
    runs = trained / "runs" / RUN
    bank = json.loads((runs / "bank" / "result.json").read_text())
    telco = json.loads((runs / "telco" / "result.json").read_text())
    assert bank["test"]["n_scored"] == len(ids) == telco["psi"]["test"]["intersection"]
    assert "from data.path" in (runs / "telco" / "log.txt").read_text()


def test_vsplit_predict_equals_the_pooled_model_and_points_add_up(trained):
    models = _models(trained)
    x, _, ids = _woe(trained, models, "test")
    coef = np.concatenate([np.asarray(models[n]["coef"], dtype=float) for n in NAMES])
    z = x @ coef + float(models["bank"]["intercept"])
    job = trained / "runs" / RUN / "bank" / "predictions" / "j1"
    got = pd.read_csv(job / "predictions.csv", dtype={"customer_id": str}).set_index("customer_id")
    np.testing.assert_allclose(got.loc[ids, "probability"].to_numpy(), sigmoid(z), rtol=0, atol=1e-9)
    points = pd.read_csv(job / "points.csv", dtype={"customer_id": str}).set_index("customer_id").loc[ids]
    scaling = Scaling(base_score=500)
    np.testing.assert_allclose(scaling.log_odds(points["score"].to_numpy()), z, atol=1e-9)
    parts = points[[f"points_{n}" for n in NAMES]].sum(axis=1) + scaling.base_points(float(models["bank"]["intercept"]))
    np.testing.assert_allclose(parts.to_numpy(), points["score"].to_numpy(), atol=1e-9)
    entries = [e.strip().split(" (-")[0].split(":", 1) for r in points["reasons"].fillna("") for e in r.split(";")
               if e.strip()]
    named = {party: {a for p, a in entries if p == party} for party in NAMES}
    assert named["telco"] and all(a.startswith("#") for a in named["telco"])  # telco does not share names
    assert named["shop"] and named["shop"] <= {"default", "balance", "housing", "loan"}


def test_model_card_shows_only_what_each_partner_shares(trained):
    card = (trained / "runs" / RUN / "bank" / "scorecard.md").read_text()
    assert "### shop" in card and "names shared" in card and "| balance |" in card
    assert "telco: " in card and "telco keeps its points table" in card
    for column in ("contact", "campaign", "pdays", "poutcome"):
        assert column not in card
