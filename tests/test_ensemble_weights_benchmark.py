"""benchmarks/ensemble_weights.py's pieces that decide its figures: each rule's weight from the set-aside rows only,
and the summary's gains over the bag alone (the oracle's is the largest any rule can reach)."""

from __future__ import annotations

import numpy as np
import pytest
from _benchmark_support import benchmark_module


@pytest.fixture(scope="module")
def bench():
    yield from benchmark_module("ensemble_weights.py", "ensemble_weights_benchmark")


def test_each_rule_reads_only_the_set_aside_rows(bench):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    good, noise = (2 * y - 1) + rng.normal(size=400), rng.normal(size=400)
    # the trees carry the signal, the networks none: the AUC and the log loss both put the weight on the trees
    chosen = bench.weights_of(y, noise, good)
    assert chosen["half"] == 0.5 and chosen["networks"] == 1.0
    assert chosen["best"] <= 0.2 and chosen["log_loss"] <= 0.2 and chosen["one_se"] <= 0.2
    assert bench.weights_of(y, good, noise)["best"] >= 0.8  # and the other way round
    assert set(chosen) == set(bench.RULES)


def test_the_summary_is_each_rules_gain_over_the_bag_alone(bench):
    def run(networks, best, oracle):
        rules = {"best": {"weight": 0.3, "auc": best}, "half": {"weight": 0.5, "auc": networks},
                 "networks": {"weight": 1.0, "auc": networks}, "log_loss": {"weight": 0.4, "auc": best}}
        return {"networks_auc": networks, "rules": rules, "oracle": {"weight": 0.6, "auc": oracle}}

    summary = bench.summarise({"a": {0: run(0.80, 0.79, 0.81)}, "b": {0: run(0.90, 0.91, 0.92), 1: run(0.7, 0.7, 0.7)}})
    assert summary["networks"] == {"mean_over_networks": 0.0, "min_over_networks": 0.0, "runs_better": 0,
                                   "runs_worse": 0, "runs": 3}
    assert summary["best"] == {"mean_over_networks": 0.0, "min_over_networks": -0.01, "runs_better": 1,
                               "runs_worse": 1, "runs": 3}
    assert summary["oracle"]["mean_over_networks"] == pytest.approx(0.01)
