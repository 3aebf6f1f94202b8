"""`vsplit report` merges partners' own reports without letting one rewrite the bank's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vsplit.cli.main import main
from vsplit.report.writer import write_label_report

METRICS = {"auc": 0.8, "ks": 0.5, "accuracy": 0.9, "f1": 0.4, "log_loss": 0.3, "n_scored": 10}
TRAFFIC = {"sent": {"TrainingPlan": {"frames": 1, "bytes": 100}}, "received": {"Activations": {"frames": 9,
                                                                                             "bytes": 900}}}


def bank_run(run: Path) -> bytes:
    """A finished run's folder holding the bank's own report; returns its report.json bytes."""
    write_label_report(run / "bank", {
        "run_id": "r", "party": "bank", "role": "label", "created": "2026-12-04T00:00:00", "metrics": METRICS,
        "baselines": {}, "history": [{"epoch": 0, "train_loss": 0.5, "val_auc": None}], "best_epoch": 0,
        "psi": {"train": {"size": 10, "intersection": 9, "peer_sizes": {"partner": 9}}},
        "communication": {"bank": TRAFFIC}, "seconds": {"train": 1.0}, "config_hashes": {"bank": "b" * 64},
        "plots": {}})
    return (run / "bank" / "report.json").read_bytes()


def partner_report(run: Path, folder: str, **fields) -> None:
    (run / folder).mkdir(parents=True, exist_ok=True)
    report = {"schema": "vsplit-report-1-partner", "run_id": "r", "party": folder, "role": "feature",
              "communication": {"sent": {"Activations": {"frames": 9, "bytes": 900}}, "received": {},
                                "by_peer": {"bank": {"sent": 900, "received": 0}}},
              "config_hashes": {folder: "a" * 64}, "seconds": {"train": 1.0}, **fields}
    (run / folder / "report.json").write_text(json.dumps(report))


def test_partner_reports_merge_keyed_by_their_folder_and_the_banks_file_stays(tmp_path, capsys):
    own = bank_run(tmp_path)
    partner_report(tmp_path, "partner")
    assert main(["report", "--run", str(tmp_path), "--check"]) == 0
    assert "valid" in capsys.readouterr().out
    assert (tmp_path / "bank" / "report.json").read_bytes() == own
    merged = json.loads((tmp_path / "bank" / "report-merged.json").read_text())
    assert set(merged["communication"]) == {"bank", "partner"}
    assert merged["config_hashes"] == {"bank": "b" * 64, "partner": "a" * 64}
    assert merged["merged_from"] == {"partner": "partner/report.json"}
    assert "n/a" in (tmp_path / "bank" / "report.md").read_text()  # the undefined validation AUC


FORGED = {
    "claims the bank's name": ({"party": "bank", "config_hashes": {"bank": "0" * 64}},
                               "says party 'bank' but sits in folder 'partner'"),
    "claims the bank's config hash": ({"config_hashes": {"bank": "0" * 64, "partner": "a" * 64}},
                                      r"config hashes of other parties \(\['bank'\]\)"),
    "has no traffic": ({"communication": {"sent": {}}}, "must hold 'sent' and 'received'"),
    "has a bad count": ({"communication": {"sent": {"X": {"frames": -1, "bytes": 1}}, "received": {}}},
                        "whole numbers"),
}


@pytest.mark.parametrize("fields, message", FORGED.values(), ids=FORGED.keys())
def test_a_forged_partner_report_is_refused_and_nothing_is_written(tmp_path, capsys, fields, message):
    own = bank_run(tmp_path)
    before = (tmp_path / "bank" / "report.md").read_bytes()
    partner_report(tmp_path, "partner", **fields)
    assert main(["report", "--run", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr()
    assert "partner/report.json" in err.err and "valid" not in err.out
    assert re.search(message, err.err), err.err
    assert (tmp_path / "bank" / "report.json").read_bytes() == own  # byte-identical
    assert (tmp_path / "bank" / "report.md").read_bytes() == before
    assert not (tmp_path / "bank" / "report-merged.json").exists()


def test_a_malformed_partner_file_is_a_data_error_naming_it(tmp_path, capsys):
    bank_run(tmp_path)
    (tmp_path / "partner").mkdir()
    (tmp_path / "partner" / "report.json").write_text('{"party": "partner", ')
    assert main(["report", "--run", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "partner/report.json: not a readable JSON report" in err and "Traceback" not in err
