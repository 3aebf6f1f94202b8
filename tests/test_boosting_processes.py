"""Boosted trees between organizations: a bank and two partners (shop, telco) as three OS processes over mutual TLS,
configured with ``[model] kind = "boosting"``, grow the trees the pooled reference grows on the same aligned rows
and bins (same splits, leaves within 1e-6); ``vsplit predict`` equals the pooled model's predictions; a partner
killed mid-run, then every party rerun with ``--resume``, gives the same trees; and bad input fails clearly.

Small tables (the bundled bank sample cut to the bank's first 900 customers), 1024-bit test keys behind the
test-only variable.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from _pilot_support import free_port, start, wait_all
from _three_party_support import PARTNERS, prepare_three_parties

from vsplit.boosting import BoostParams, fit_bins, fit_pooled, pooled_ranks, rank_codes
from vsplit.boosting.early import first_stop
from vsplit.boosting.gains import goes_left
from vsplit.config.boosting import SMALL_KEYS_ENV
from vsplit.node.boost_state import Encoder, holdout_mask, trees_from
from vsplit.runtime.checkpoint import load_checkpoint

NAMES = ("bank", *PARTNERS)
PARAMS = BoostParams(trees=5, max_depth=3, learning_rate=0.3, reg_lambda=1.0, min_child_weight=1.0)
EXTRA = f"""
[model]
kind = "boosting"

[boosting]
trees = {PARAMS.trees}
max_depth = {PARAMS.max_depth}
max_bins = 8
key_bits = 1024
"""
ROWS = 900


def _prepare(root: Path, run_id: str, *, parties: tuple[str, ...] = NAMES) -> dict[str, Path]:
    """The configs and tables of ``parties`` (the bank first): the bank's first ``ROWS`` training customers, each
    partner most of them, not all."""
    configs = prepare_three_parties(root, port=free_port(), run_id=run_id, extra=EXTRA)
    if "telco" not in parties:  # the bank and the shop only
        bank = configs["bank"].read_text().replace(', telco = "keys/peers/telco.pem"', "")
        configs["bank"].write_text(bank)
        del configs["telco"]
    keep = pd.read_parquet(root / "bank" / "data" / "train.parquet")["customer_id"].head(ROWS)
    for name in NAMES:  # the bank's first ROWS customers; each partner knows most of them, not all
        path = root / name / "data" / "train.parquet"
        table = pd.read_parquet(path)
        table[table["customer_id"].isin(keep.iloc[40 * NAMES.index(name):])].to_parquet(path, index=False)
    return configs


def _run_all(configs: dict[str, Path], root: Path, command: list[str], *, tag: str, timeout: float = 240) -> None:
    logs = {p: root / f"{p}-{tag}.log" for p in configs}
    procs = {p: start([*command, "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=timeout)


def _tables(root: Path, split: str, parties: tuple[str, ...] = NAMES) -> dict[str, pd.DataFrame]:
    return {n: pd.read_parquet(root / n / "data" / f"{split}.parquet") for n in parties}


def _aligned(tables: dict[str, pd.DataFrame]) -> dict[str, np.ndarray]:
    """Each party's rows of the customers all three know, in sorted-ID order (the order PSI agrees on)."""
    shared = set.intersection(*(set(t["customer_id"].astype(str)) for t in tables.values()))
    out = {}
    for name, table in tables.items():
        ids = table["customer_id"].astype(str).to_numpy()
        rows = np.nonzero(np.isin(ids, list(shared)))[0]
        out[name] = rows[np.argsort(ids[rows], kind="stable")]
    return out


def _pooled(root: Path, parties: tuple[str, ...] = NAMES, params: BoostParams = PARAMS, *,
            holdout: bool = False) -> dict:
    """The pooled reference on the aligned training rows of ``parties``' tables under ``root``, with each party's
    encoder and bins as its node makes them."""
    tables = _tables(root, "train", parties)
    rows = _aligned(tables)
    encoders, bins, codes = {}, {}, {}
    for name, table in tables.items():
        features = table.drop(columns=["customer_id", *(["y"] if name == "bank" else [])])
        encoders[name] = Encoder.fit(features)
        values = encoders[name].transform(features.iloc[rows[name]])
        bins[name] = fit_bins(values, categorical=encoders[name].categorical, max_bins=8)
        codes[name] = bins[name].transform(values)
    labels = (tables["bank"]["y"].iloc[rows["bank"]].astype(str) == "yes").to_numpy(dtype=float)
    train = holdout_mask(len(labels), fraction=0.1, seed=0) == 0 if holdout else np.ones(len(labels), dtype=bool)
    widths = [bins[n].width for n in parties]
    if params.order_categories:  # the first tree's renumbering, as the nodes make it
        ranks = pooled_ranks([codes[n][train] for n in parties], labels[train], widths=widths, params=params,
                             categorical=[bins[n].categorical for n in parties])
        bins = {n: bins[n].ranked(r) for n, r in zip(parties, ranks, strict=True)}
        codes = {n: rank_codes(codes[n], r) for n, r in zip(parties, ranks, strict=True)}
    model = fit_pooled([codes[n][train] for n in parties], labels[train], widths=widths, params=params)
    return {"model": model, "encoders": encoders, "bins": bins}


@pytest.fixture(scope="module")
def pooled(trained):
    """The pooled reference of the three-party run's data."""
    return _pooled(trained)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One uninterrupted run, then a `vsplit predict` job on every party's test table."""
    return _train_and_predict(tmp_path_factory.mktemp("boost-run"))


@pytest.fixture(scope="module")
def ordered(tmp_path_factory):
    """The same run with ``boosting.order_categories = true`` (every party has categorical columns)."""
    return _train_and_predict(tmp_path_factory.mktemp("boost-ordered"), order=True)


def _train_and_predict(root: Path, *, order: bool = False) -> Path:
    configs = _prepare(root, "boost-tls")
    if order:
        for path in configs.values():
            path.write_text(path.read_text().replace("[boosting]\n", "[boosting]\norder_categories = true\n"))
    mp = pytest.MonkeyPatch()
    mp.setenv(SMALL_KEYS_ENV, "1")
    try:
        _run_all(configs, root, ["train"], tag="train")
        logs = {p: root / f"{p}-predict.log" for p in configs}
        procs = {p: start(["predict", "--config", str(c), "--input", str(root / p / "data" / "test.parquet"),
                           "--job", "j1", "--quiet"], log=logs[p]) for p, c in configs.items()}
        wait_all(procs, logs, timeout=120)
    finally:
        mp.undo()
    return root


def _trees(root: Path, run_id: str):
    state = load_checkpoint(root / "runs" / run_id / "bank" / "model.npz", run_id=run_id, party="bank")
    return trees_from(state)


def _assert_same_trees(ours, theirs, *, trees: int = PARAMS.trees) -> None:
    assert len(ours) == len(theirs) == trees
    owners = set()
    for a, b in zip(ours, theirs, strict=True):
        assert {n: s.key() for n, s in a.splits.items()} == {n: s.key() for n, s in b.splits.items()}
        assert {n: s.record for n, s in a.splits.items()} == {n: s.record for n, s in b.splits.items()}
        assert a.leaves.keys() == b.leaves.keys()
        assert max(abs(a.leaves[n] - b.leaves[n]) for n in a.leaves) <= 1e-6
        owners |= {s.party for s in a.splits.values()}
    assert len(owners) >= 2, f"splits owned by {owners} only: the test would prove little"


def test_three_processes_over_tls_grow_the_pooled_trees(trained, pooled):
    _assert_same_trees(_trees(trained, "boost-tls"), pooled["model"].trees)
    result = json.loads((trained / "runs" / "boost-tls" / "bank" / "result.json").read_text())
    assert result["trees"] == PARAMS.trees and result["resumed_from"] == 0
    assert 0.6 < result["test"]["auc"] <= 1.0 and result["test"]["n_scored"] > 100
    assert (trained / "runs" / "boost-tls" / "bank" / "report.md").is_file()
    for name in PARTNERS:  # a partner keeps its records and bins; it gets no score
        partner = json.loads((trained / "runs" / "boost-tls" / name / "result.json").read_text())
        assert partner["trees"] == PARAMS.trees and partner["test"] is None


def test_vsplit_report_merges_and_checks_a_boosting_run(trained):
    run = trained / "runs" / "boost-tls"
    done = subprocess.run([sys.executable, "-m", "vsplit.cli.main", "report", "--run", str(run), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "valid; merged with 2 partner report(s)" in done.stdout
    merged = json.loads((run / "bank" / "report-merged.json").read_text())
    result = json.loads((run / "bank" / "result.json").read_text())
    assert merged["model"] == {"kind": "boosting", "trees": PARAMS.trees, "kept_trees": PARAMS.trees,
                               "max_depth": PARAMS.max_depth, "learning_rate": PARAMS.learning_rate,
                               "validation_losses": []}
    assert merged["metrics"]["auc"] == result["test"]["auc"] and merged["baselines"] == {}
    assert merged["credit"]["bootstrap"]["auc"][0] < merged["metrics"]["auc"] < merged["credit"]["bootstrap"]["auc"][1]
    assert set(merged["communication"]) == set(NAMES) and merged["history"] == []
    text = (run / "bank" / "report.md").read_text()
    assert f"{PARAMS.trees} trees trained" in text and "No bank-alone comparison" in text


def test_three_processes_with_ordered_categories_grow_the_pooled_trees_and_predict_as_it_does(ordered):
    params = dataclasses.replace(PARAMS, order_categories=True)
    reference = _pooled(ordered, params=params)
    _assert_same_trees(_trees(ordered, "boost-tls"), reference["model"].trees)
    renumbered = 0
    for name in NAMES:  # each party's saved bins carry the renumbering the pooled reference made
        state = load_checkpoint(ordered / "runs" / "boost-tls" / name / "model.npz", run_id="boost-tls", party=name)
        expected = reference["bins"][name].ranks
        assert expected is not None and np.array_equal(state["bins"]["ranks"], expected)
        renumbered += int((expected != np.arange(expected.shape[1])).any(axis=1).sum())
    assert renumbered >= 3, "no column was renumbered: the test would prove little"
    _assert_predictions_equal(ordered, reference)


def test_vsplit_predict_equals_the_pooled_model(trained, pooled):
    _assert_predictions_equal(trained, pooled)


def _assert_predictions_equal(trained: Path, pooled: dict) -> None:
    tables = _tables(trained, "test")
    rows = _aligned(tables)
    codes = {}
    for name, table in tables.items():
        features = table.drop(columns=["customer_id", *(["y"] if name == "bank" else [])])
        codes[name] = pooled["bins"][name].transform(pooled["encoders"][name].transform(features.iloc[rows[name]]))
    model = pooled["model"]
    splits = [s for tree in model.trees for s in tree.splits.values() if s.party]
    bits = {k: np.zeros((len(codes["bank"]), sum(s.party == k for s in splits)), np.uint8) for k in (1, 2)}
    for s in splits:
        bits[s.party][:, s.record] = goes_left(codes[NAMES[s.party]][:, s.column], bin=s.bin,
                                               missing_left=s.missing_left, width=model.widths[s.party])
    expected = model.predict_proba(own_codes=codes["bank"], decisions=bits)
    ids = tables["bank"]["customer_id"].astype(str).to_numpy()[rows["bank"]]
    got = pd.read_csv(trained / "runs" / "boost-tls" / "bank" / "predictions" / "j1" / "predictions.csv",
                      dtype={"customer_id": str}).set_index("customer_id")
    assert (got.loc[ids, "status"] == "scored").all()
    np.testing.assert_allclose(got.loc[ids, "probability"].to_numpy(), expected, rtol=0, atol=1e-9)
    assert (got["status"] != "scored").sum() == len(tables["bank"]) - len(ids)  # the others are listed, not scored


@pytest.mark.parametrize("order", [False, True], ids=["codes", "ordered"])
def test_partner_killed_mid_run_then_resume_gives_the_same_trees(tmp_path, monkeypatch, order):
    """A bank and one partner (two processes keep the test fast), with early stopping on the bank's held-out rows:
    the shop is killed once the bank finished two trees; both rerun with --resume continue from the last tree both
    finished and end with the pooled trees of the rows not held out (the best prefix of them). Ordered: the
    categories' renumbering the first tree made comes back from the checkpoints."""
    monkeypatch.setenv(SMALL_KEYS_ENV, "1")
    configs = _prepare(tmp_path, "boost-resume", parties=("bank", "shop"))
    params = dataclasses.replace(PARAMS, trees=8, order_categories=order)  # the kill: after two trees of eight
    for path in configs.values():  # a lost peer ends the run at once, instead of waiting for it to come back
        text = path.read_text().replace("[network]\n", "[network]\nreconnect_timeout_s = 0\n")
        text = text.replace(f"trees = {PARAMS.trees}", f"trees = {params.trees}\nearly_stopping_rounds = 4"
                            + ("\norder_categories = true" if order else ""))
        path.write_text(text)
    logs = {p: tmp_path / f"{p}-first.log" for p in configs}
    procs = {p: start(["train", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    checkpoints = tmp_path / "runs" / "boost-resume" / "bank" / "checkpoints"
    deadline = time.monotonic() + 180
    while not (checkpoints / "tree-0002.npz").exists():
        assert time.monotonic() < deadline and procs["bank"].poll() is None, logs["bank"].read_text()[-3000:]
        time.sleep(0.005)
    procs["shop"].kill()  # mid-run: the bank has finished two trees of eight
    assert procs["bank"].wait(timeout=120) != 0, "the run went on without the shop"
    procs["shop"].wait(timeout=30)
    assert not (tmp_path / "runs" / "boost-resume" / "bank" / "model.npz").exists()
    logs = {p: tmp_path / f"{p}-resume.log" for p in configs}
    procs = {p: start(["train", "--config", str(c), "--quiet", "--resume"], log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=240)
    result = json.loads((tmp_path / "runs" / "boost-resume" / "bank" / "result.json").read_text())
    assert 1 <= result["resumed_from"] < params.trees
    losses, kept = result["validation_losses"], result["kept_trees"]
    stop = first_stop(losses, rounds=4)
    assert len(losses) == result["trees"] and kept == (stop[1] if stop else int(np.argmin(losses)) + 1)
    reference = _pooled(tmp_path, ("bank", "shop"), params, holdout=True)["model"].trees
    _assert_same_trees(_trees(tmp_path, "boost-resume"), reference[:kept], trees=kept)
    run_id, trained = "boost-resume", result["trees"]  # every tree trained, kept or not: the last checkpoint's
    last = load_checkpoint(checkpoints / f"tree-{trained:04d}.npz", run_id=run_id, party="bank")
    _assert_same_trees(trees_from(last), reference[:trained], trees=trained)
    assert ("ranks" in last["bins"]) == order  # the renumbering travels with the checkpoints
