"""benchmarks/ordered_categories.py's pieces that decide its figures: each choice keeps the best validation AUC of its
candidates (never the test AUC), and the summary's differences to the unordered trees."""

from __future__ import annotations

import pytest
from _benchmark_support import benchmark_module


@pytest.fixture(scope="module")
def bench():
    yield from benchmark_module("ordered_categories.py", "ordered_categories_benchmark")


def _candidate(order: bool, validation: float, test: float) -> dict:
    return {"order_categories": order, "validation_auc": validation, "test_auc": test}


def test_each_choice_keeps_the_best_validation_auc_never_the_best_test_auc(bench):
    candidates = [_candidate(False, 0.80, 0.70), _candidate(False, 0.82, 0.69), _candidate(True, 0.81, 0.75),
                  _candidate(True, 0.79, 0.90)]
    chosen = bench.choices(candidates)
    assert chosen["codes"] is candidates[1] and chosen["ordered"] is candidates[2]
    assert chosen["either"] is candidates[1]  # the validation decides, though the ordered trees test better


def test_the_summary_is_each_choices_mean_and_its_gain_over_the_codes(bench):
    def seed(codes: float, ordered: float, either_ordered: bool) -> dict:
        out = {"codes": _candidate(False, 0.8, codes), "ordered": _candidate(True, 0.8, ordered)}
        return {**out, "either": out["ordered" if either_ordered else "codes"]}

    summary = bench.summarise({0: seed(0.80, 0.82, True), 1: seed(0.70, 0.69, False)})
    assert summary["codes"]["auc"] == 0.75 and summary["ordered"]["auc"] == 0.755
    assert summary["ordered_minus_codes"] == {"mean": 0.005, "worst": -0.01, "per_seed": [0.02, -0.01]}
    assert summary["either_minus_codes"] == {"mean": 0.01, "worst": 0.0, "per_seed": [0.02, 0.0]}
    assert summary["either_picked_ordered"] == 1
