"""benchmarks/ensemble_serve.py's pieces that decide its figures: which configs each served model trains with, and
the check that a served split score is ``vsplit predict``'s (a bag also answers the customers a partner does not
know, with its bank-only model; those are not compared)."""

from __future__ import annotations

import pandas as pd
import pytest
from _benchmark_support import benchmark_module


@pytest.fixture(scope="module")
def bench():
    yield from benchmark_module("ensemble_serve.py", "ensemble_serve_benchmark")


def _frames(split_ids: list[str], scores: list[float]):
    served = pd.DataFrame({"id": ["a", "b", "c"], "score": [0.2, 0.5, 0.9],
                           "model": ["split" if i in split_ids else "bank_only" for i in "abc"]})
    batch = pd.DataFrame({"customer_id": ["a", "b", "c"], "probability": scores, "model": ["split", "split", ""],
                          "status": ["scored", "scored", "unknown to a partner"]})  # predictions.csv's columns
    return served, batch


def test_split_diff_compares_the_split_scores_only(bench):
    served, batch = _frames(["a", "b"], [0.2, 0.5 + 1e-7, float("nan")])
    assert bench.split_diff(served, batch) == pytest.approx(1e-7, abs=1e-12)


def test_split_diff_refuses_other_customers_scored_by_the_split(bench):
    served, batch = _frames(["a", "b", "c"], [0.2, 0.5, float("nan")])
    with pytest.raises(AssertionError, match="served models"):
        bench.split_diff(served, batch)


def test_each_model_trains_with_its_own_kind(bench):
    from vsplit.config.schema import EnsembleSection

    sets = {m: bench.model_sets(m, epochs=3, trees=7) for m in bench.MODELS}
    assert "train.networks=5" in sets["bag"] and not any(s.startswith("model.kind") for s in sets["bag"])
    assert "model.kind=boosting" in sets["trees"] and "boosting.trees=7" in sets["trees"]
    assert {"model.kind=ensemble", "ensemble.networks=5", "boosting.trees=7", "train.epochs=3"} <= set(sets["ensemble"])
    assert EnsembleSection().networks == 1  # the benchmark's bag of 5 is set, not a default it relies on
