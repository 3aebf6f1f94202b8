"""A bank data scientist's first hour: the credit-risk figures, the report without a test set, the console.

The same checks on a real run (three OS processes over mutual TLS, a test set, then ``vsplit predict``) are in
tests/test_three_parties.py (helpers in tests/_first_hour_support.py); the report without a test set on a real run is
checked in tests/test_predict_jobs.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from vsplit.cli.main import main
from vsplit.metrics import roc_auc
from vsplit.report.credit import bootstrap_intervals, credit_summary, score_bands, threshold_table
from vsplit.report.writer import write_partner_report
from vsplit.version import __version__


def _scored(n: int = 997, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.12).astype(int)
    return y, np.clip(0.3 * y + rng.normal(0.3, 0.2, n), 0, 1)


def test_score_bands_sum_to_the_rows_and_events_and_rank_high_scores_first():
    y, p = _scored()
    bands = score_bands(y, p)
    assert [b["band"] for b in bands] == list(range(1, 11))
    assert sum(b["count"] for b in bands) == len(y) and sum(b["events"] for b in bands) == int(y.sum())
    assert bands[0]["min_score"] >= bands[-1]["max_score"] and bands[0]["event_rate"] > bands[-1]["event_rate"]
    assert bands[-1]["cum_capture"] == pytest.approx(1.0)


def test_gini_is_two_auc_minus_one_and_the_intervals_hold_their_point_estimates():
    y, p = _scored()
    rng = np.random.default_rng(9)
    weaker = np.clip(p + rng.normal(0, 0.3, len(p)), 0, 1)
    credit = credit_summary(y, p, baseline=weaker, draws=100, seed=1)
    assert credit["gini"] == pytest.approx(2 * roc_auc(y, p) - 1)
    low, high = credit["bootstrap"]["auc"]
    assert low < credit["auc"] < high
    gain_low, gain_high = credit["bootstrap"]["gain"]
    assert gain_low < credit["bootstrap"]["gain_point"] < gain_high and gain_low > 0  # clearly the better model
    again = bootstrap_intervals(y, p, baseline=weaker, draws=100, seed=1)
    assert again["auc"] == credit["bootstrap"]["auc"]  # seeded: the same interval every time


def test_threshold_table_declines_the_highest_scores():
    y, p = _scored()
    rows = threshold_table(y, p, decline_shares=(0.1, 0.5))
    assert [r["approval_rate"] for r in rows] == pytest.approx([0.9, 0.5], abs=1e-3)
    assert rows[0]["precision"] > y.mean() > rows[0]["bad_rate"]  # the declined are riskier than the approved
    assert rows[1]["recall"] > rows[0]["recall"]


def test_a_label_partys_report_without_a_test_set_shows_its_validation_history(tmp_path):
    history = [{"epoch": 0, "train_loss": 0.5, "val_loss": 0.45, "val_auc": 0.7},
               {"epoch": 1, "train_loss": 0.4, "val_loss": 0.41, "val_auc": 0.74}]
    path = write_partner_report(tmp_path, {"run_id": "r", "party": "bank", "role": "label", "seconds": {"train": 1.0},
                                           "communication": {"sent": {}, "received": {}}, "history": history,
                                           "best_epoch": 1, "monitor": "val_loss"})
    text = path.read_text()
    assert "## Training (validation history)" in text and "Chosen epoch: 2 (of 2 run), by val_loss" in text
    assert "| 2 | 0.4000 | 0.4100 | 0.7400 |" in text and (tmp_path / "report.html").is_file()


def test_estimator_with_fallback_scores_every_customer_and_says_which_model_did():
    import pandas as pd

    from vsplit.estimator import SplitClassifier

    rng = np.random.default_rng(0)
    ids = [f"c{i}" for i in range(400)]
    a, b = rng.normal(size=400), rng.normal(size=400)
    bank = pd.DataFrame({"customer_id": ids, "a": a, "y": np.where(a + b > 0, "yes", "no")})
    partner = pd.DataFrame({"customer_id": ids[:320], "b": b[:320]})  # the partner does not know the last 80
    views = {"bank": bank, "partner": partner}
    clf = SplitClassifier(epochs=2, batch_size=64, fallback=True, random_state=0).fit(views)
    p = clf.predict_proba(views)[:, 1]
    assert not np.isnan(p).any()
    by = clf.scored_by(views)
    assert (by[:320] == "split").all() and (by[320:] == "bank_only").all()
    assert roc_auc((a[320:] + b[320:] > 0).astype(int), p[320:]) > 0.6  # the bank's own column still ranks


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"vsplit {__version__}"
