"""Checks of a bank data scientist's first hour on a trained and scored run (used by the three-process test of
tests/test_three_parties.py, which trains with a test set and then predicts).

Every customer the bank knows gets a probability, the ones a partner does not know are scored by the bank's own
fallback model and marked so, the fallback's AUC on them is reported; the credit-risk report adds up (score bands sum
to the test rows and events, Gini = 2 AUC - 1, the bootstrap interval holds the point estimate) and has a one-file
HTML version; ``vsplit train`` prints a human summary, JSON only with ``--json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest


def check_every_customer_scored(predictions_csv: Path, requested: int, predict_log: str) -> None:
    """Every requested customer the bank knows has a probability; the fallback's rows say ``bank_only``."""
    predictions = pd.read_csv(predictions_csv, dtype={"customer_id": str})
    assert len(predictions) == requested
    assert predictions["probability"].notna().all() and predictions["probability"].between(0, 1).all()
    unknown = predictions["status"] == "unknown to a partner"
    assert unknown.sum() > 0  # the partners know 90 % of the bank's customers
    assert (predictions.loc[unknown, "model"] == "bank_only").all()
    assert (predictions.loc[~unknown, "model"] == "split").all()
    assert f"{int(unknown.sum()):,} by bank_only" in predict_log


def check_coverage(report: dict, markdown: str) -> None:
    """Metrics for every test customer, the shared ones (the split) and the others (the bank's own model)."""
    cov = report["coverage"]
    assert cov["shared"]["n_scored"] == report["metrics"]["n_scored"]
    assert cov["shared"]["auc"] == pytest.approx(report["metrics"]["auc"])
    assert cov["all"]["n_scored"] == cov["shared"]["n_scored"] + cov["bank_only"]["n_scored"]
    assert 0.0 <= cov["bank_only"]["auc"] <= 1.0
    assert "unknown to a partner (bank's own model)" in markdown
    # the bank alone is its better own model on its validation rows, named; the gain is over it, on the same rows
    bank = report["bank_model"]
    assert bank["model"] in ("network", "logistic_regression")
    assert bank["val_auc"][bank["model"]] == max(bank["val_auc"].values())
    assert f"is the bank's {bank['model'].replace('_', ' ')} on its own columns" in markdown
    alone = report["baselines"].get("label_party_only")  # output.baselines = false: the table has no such row
    if alone is not None:
        assert alone["model"] == bank["model"] and alone["n_scored"] == report["metrics"]["n_scored"]
        assert report["credit"]["bootstrap"]["gain_point"] == pytest.approx(report["metrics"]["auc"] - alone["auc"])


def check_credit_report(report: dict, test_events: int, markdown: str, page: str) -> None:
    """The decile table sums to the test rows and events; Gini = 2 AUC - 1; the intervals hold their points."""
    credit = report["credit"]
    assert credit["rows"] == report["metrics"]["n_scored"]
    assert sum(b["count"] for b in credit["bands"]) == credit["rows"]
    assert sum(b["events"] for b in credit["bands"]) == credit["events"] <= test_events
    assert credit["bands"][-1]["cum_capture"] == pytest.approx(1.0)
    assert credit["gini"] == pytest.approx(2 * report["metrics"]["auc"] - 1)
    low, high = credit["bootstrap"]["auc"]
    assert low <= report["metrics"]["auc"] <= high
    gain_low, gain_high = credit["bootstrap"]["gain"]
    assert gain_low <= credit["bootstrap"]["gain_point"] <= gain_high
    assert credit["base_rate"] == pytest.approx(credit["events"] / credit["rows"])
    assert "### Score bands" in markdown and "### Thresholds" in markdown and "Gini" in markdown
    assert page.count("data:image/png;base64,") == len(report["plots"]) and "capture" in report["plots"]


def check_train_output(bank_log: str, json_log: str, *, party: str) -> None:
    """The bank printed a short summary (no JSON); ``party``, run with ``--json``, one JSON object and nothing else."""
    assert "{" not in bank_log and "test AUC" in bank_log and "Gini" in bank_log and "report: " in bank_log
    record = json.loads(json_log)
    assert record["party"] == party and record["psi_intersection"] > 0 and record["test_auc"] is None
