"""The pilot end to end over real TLS between two processes, on the small secretflow_bank preset."""

from __future__ import annotations

import json

import jsonschema
import pytest

from vsplit.pilot.orchestrate import run_pilot
from vsplit.report.writer import schema

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    root = tmp_path_factory.mktemp("pilot")
    return run_pilot("secretflow-bank", root=root / "parties", run_id="e2e", overrides=("train.epochs=4",),
                     quiet=True, timeout=600)


def test_pilot_writes_a_report_that_matches_the_schema(pilot):
    own = json.loads((pilot.run_dir / "bank" / "report.json").read_text())  # the bank's process wrote it, as it was
    jsonschema.validate(own, schema())
    assert set(own["baselines"]) == {"label_party_only"} and set(own["communication"]) == {"bank"}
    report = json.loads((pilot.run_dir / "bank" / "report-merged.json").read_text())
    jsonschema.validate(report, schema())
    assert set(report["baselines"]) == {"label_party_only", "centralized"}
    assert set(report["communication"]) == {"bank", "partner"}
    # split training over TLS and the centralized model (one process, no cut) are the same model
    assert report["metrics"]["auc"] == pytest.approx(report["baselines"]["centralized"]["auc"], abs=1e-6)
    assert report["psi"]["train"]["intersection"] == 3616


def test_pilot_plots_exist_and_are_png(pilot):
    folder = pilot.run_dir / "bank"
    for name in ("roc.png", "ks.png", "history.png", "auc_comparison.png"):
        data = (folder / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 2000, name
    assert "split (all parties)" in (folder / "report.md").read_text()


def test_pilot_batch_prediction_reports_every_requested_customer(pilot):
    import pandas as pd

    predictions = pd.read_csv(pilot.predictions)
    assert len(predictions) == 905
    assert (predictions["status"] == "scored").all()  # secretflow_bank: the partner knows every customer
    assert predictions["probability"].between(0, 1).all()


def test_partner_keeps_only_its_own_outputs(pilot):
    partner = pilot.run_dir / "partner"
    job = partner / "predictions" / pilot.job
    assert not (job / "predictions.csv").exists() and (job / "predict.json").exists()
    theirs = json.loads((partner / "report.json").read_text())
    assert "Activations" in theirs["communication"]["sent"]
    assert "Gradients" not in theirs["communication"]["sent"]
    assert "TrainingPlan" not in theirs["communication"]["sent"]
