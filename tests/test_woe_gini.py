"""The value report's Gini comparison: a bank-only scorecard against a joint one on held-out validation rows.

The joint scorecard trained across the cut on the rows not held out equals the pooled one on those rows (the label
party's residuals of held-out rows are encrypted zeros, the others spread over every row); the notebook's report
gives both Ginis as the pooled computation gives them, and a paired bootstrap interval around their difference.
In memory, 1024-bit test keys behind the test-only flag.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from tests._scorecard_support import PARAMS, parties
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.scorecard import LabelScorecard, PartnerScorecard, ScorecardParams, columns_from_maps, fit_pooled, sigmoid
from vsplit.woe.gini import gini_comparison, validation_rows

pytestmark = pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning")
PARTNERS = ("shop", "telco")


def test_a_scorecard_fit_on_masked_rows_across_the_cut_equals_the_pooled_one_on_those_rows():
    pytest.importorskip("heu")
    labels, cols = parties(seed=3)
    fit = ~validation_rows(len(labels), share=0.3, seed=5)
    machines = {"bank": LabelScorecard(cols["bank"].matrix(), labels=labels, partners=PARTNERS, params=PARAMS,
                                       key_bits=1024, insecure_small_key_for_tests=True, fit_rows=fit)}
    for p in PARTNERS:
        machines[p] = PartnerScorecard(cols[p], label="bank", min_key_bits=1024, insecure_small_key_for_tests=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = run_machines(connect(["bank", *PARTNERS], session=b"g" * 16), machines)
    x = np.hstack([cols[n].matrix() for n in ("bank", *PARTNERS)])
    coef, intercept = fit_pooled(x[fit], labels[fit], params=PARAMS)
    split = np.concatenate([out["bank"][0], out["shop"], out["telco"]])
    assert np.abs(split - coef).max() < 1e-6 and np.abs(coef).min() > 1e-4
    assert abs(out["bank"][1] - intercept) < 1e-6
    everything, _ = fit_pooled(x, labels, params=PARAMS)
    assert np.abs(everything - coef).max() > 1e-3  # the held-out rows did not count


@pytest.fixture(scope="module")
def valued():
    pytest.importorskip("heu")
    from vsplit.woe import information_value

    rng = np.random.default_rng(0)
    n = 600
    ids = [f"c{i}" for i in range(n)]
    age, spend, calls = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    y = (0.6 * age + 1.4 * spend + rng.normal(size=n) > 0.3).astype(int)
    views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": y}),
             "shop": pd.DataFrame({"customer_id": ids, "spend": spend, "calls": calls})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = information_value(views, key_bits=1024, insecure_small_key_for_tests=True, fine_bins=8,
                                report_gini=True, validation_share=0.3, gini_draws=100, random_state=4,
                                scorecard=ScorecardParams(iterations=12), alignment="join")
    return out, views


def test_the_value_report_gives_both_ginis_as_the_pooled_scorecards_and_an_interval(valued):
    from vsplit.report.credit import roc_auc

    out, views = valued
    gini = out.report.gini
    columns = {n: columns_from_maps(b.maps, views[n].iloc[out.rows[n]].reset_index(drop=True)).matrix()
               for n, b in out.binnings.items()}
    y = views["bank"]["y"].to_numpy(dtype=float)[out.rows["bank"]]
    valid = validation_rows(len(y), share=0.3, seed=4)
    assert gini["rows"] == valid.sum() == 180 and gini["draws"] == 100
    params = ScorecardParams(iterations=12)

    def pooled_gini(x: np.ndarray) -> float:
        coef, b = fit_pooled(x[~valid], y[~valid], params=params)
        return 2 * roc_auc(y[valid].astype(int), sigmoid(x[valid] @ coef + b)) - 1

    assert abs(gini["bank_only"] - pooled_gini(columns["bank"])) < 1e-9
    assert abs(gini["joint"] - pooled_gini(np.hstack([columns["bank"], columns["shop"]]))) < 1e-4
    assert gini["joint"] > gini["bank_only"] + 0.1  # the partner's spend carries most of the signal
    low, high = gini["interval"]
    assert 0 < low < gini["difference"] < high
    text = out.report.sections["Scorecard: the bank alone against the joint one"]
    assert f"| joint | {gini['joint']:.4f} |" in text and "paired bootstrap 95% interval" in text


def test_the_comparison_is_seeded_and_paired():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 300).astype(float)
    bank, joint = y * 0.3 + rng.random(300), y * 0.6 + rng.random(300)
    first, again = (gini_comparison(y, bank, joint, draws=80, seed=9) for _ in range(2))
    assert first == again and gini_comparison(y, bank, joint, draws=80, seed=10)["interval"] != first["interval"]
    same = gini_comparison(y, bank, bank, draws=80, seed=9)  # paired: no difference in any resample
    assert same["difference"] == 0 and same["interval"] == [0.0, 0.0]
