"""The README's quality table is the one `benchmarks/quality.py --readme` prints from results-quality.json, and the
benchmark's pooled boosters train on the training rows and score the shared test rows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def load_quality():
    spec = importlib.util.spec_from_file_location("quality_benchmark", REPO / "benchmarks" / "quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_quality_table_comes_from_the_results_json():
    import json

    quality = load_quality()
    table = quality.readme_table(json.loads((REPO / "benchmarks" / "results-quality.json").read_text()))
    assert table in (REPO / "README.md").read_text(), "README's quality table is stale: paste the output of " \
        "`python benchmarks/quality.py --readme`"


def test_boosters_score_the_shared_test_rows(views):
    pytest.importorskip("lightgbm")
    from vsplit.baselines import score_boosters

    train = {n: t.iloc[: len(t) * 3 // 4].reset_index(drop=True) for n, t in views.items()}
    test = {n: t.iloc[len(t) * 3 // 4:].reset_index(drop=True) for n, t in views.items()}
    scores = score_boosters(train, test, label_party="bank", label="y", id_column="customer_id",
                            positive_label="yes", seed=0, trials=4)
    shared = set(test["bank"]["customer_id"]) & set(test["partner"]["customer_id"])
    for kind, out in scores.items():
        assert out["n_scored"] == len(shared), kind
        assert 0.6 < out["auc"] <= 1.0 and np.isfinite(out["log_loss"]), kind
    assert set(scores) == {"hgb", "lightgbm", "xgboost", "catboost"}
    assert scores["lightgbm"]["params"]["n_estimators"] >= 1 and scores["lightgbm"]["params"]["trials"] == 4
    assert scores["catboost"]["params"]["iterations"] >= 1


def test_the_benchmarks_plain_join_aligns_the_rows_psi_aligns(views):
    """benchmarks/quality.py aligns by a plain join to save PSI's time: the same rows, in the same order."""
    from vsplit.estimator import SplitClassifier

    quality = load_quality()
    rows = {}
    for alignment in ("psi", quality.RUN["alignment"]):
        clf = SplitClassifier(label_party="bank", label="y", id_column="customer_id", positive_label="yes",
                              alignment=alignment)
        ids = {n: t["customer_id"].astype(str).to_numpy() for n, t in views.items()}
        rows[alignment] = clf._align(ids, store=False)
    assert rows["psi"].keys() == rows["join"].keys()
    for name in rows["psi"]:
        np.testing.assert_array_equal(rows["psi"][name], rows["join"][name])
