"""The small-tables benchmark (benchmarks/small_tables.py) on one subsample and one seed: with the defaults, on a
1,000-row sample of ``default_credit``, the bank-alone baseline is not broken against a logistic regression, the
gain is computed on the same customers as the split's figure, and the split's defaults (its network blended with the
split scorecard) reach the pooled regression."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _benchmark():
    spec = importlib.util.spec_from_file_location("small_tables_benchmark", REPO / "benchmarks" / "small_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures(one_thread) -> tuple[object, dict]:
    from vsplit.config.boosting import SMALL_KEYS_ENV

    bench = _benchmark()
    mp = pytest.MonkeyPatch()
    mp.setenv(SMALL_KEYS_ENV, "1")  # the blend's scorecard with a 1024-bit key: the same figures, sooner
    try:
        return bench, bench.one("default_credit", 1000, 0)
    finally:
        mp.undo()


def test_the_bank_alone_on_1000_rows_is_not_broken_against_a_logistic_regression(figures):
    from vsplit.app.fallback import BANK_MODELS

    bench, out = figures
    alone, lr = out["bank_alone"], out["bank_lr"]
    assert alone["model"] in BANK_MODELS and alone["val_auc"][alone["model"]] == max(alone["val_auc"].values())
    assert alone["auc"] >= lr["auc"] - 0.01
    assert not (alone["auc"] <= bench.BROKEN and lr["auc"] > bench.LR_FLOOR)
    assert out["split_network"]["batch_size"] == 32  # 900 training rows: enough steps an epoch


def test_the_gain_is_the_splits_auc_minus_the_bank_alones_on_the_same_customers(figures):
    bench, out = figures
    _, _, test = bench.subsample("default_credit", 1000, 0)
    shared = set(test["bank"]["customer_id"]) & set(test["partner"]["customer_id"])
    assert out["split"]["n_scored"] == len(test["bank"]) == len(shared)
    assert out["gain"]["auc"] == pytest.approx(out["split"]["auc"] - out["bank_alone"]["auc"], abs=2e-4)
    assert out["gain"]["over"] == out["bank_alone"]["model"]
    assert out["split"]["candidates_"] == "network+scorecard"  # the defaults blend on 1,000 rows
    assert out["split"]["auc"] >= out["pooled_lr"]["auc"] - 0.005
    assert out["split_network"]["n_scored"] == out["split"]["n_scored"]
    summary = bench.summarise({"default_credit_1000": {"0": out}})
    assert summary["broken_baselines"] == 0
    assert summary["worst_bank_alone_minus_lr"] == pytest.approx(out["bank_alone"]["auc"] - out["bank_lr"]["auc"])
