"""The audit's Python API and its command line: one row per defense setting, a JSON list, and a report on disk."""

from __future__ import annotations

import json

import pytest

import vsplit.datasets
from vsplit.cli.main import main
from vsplit.privacy import audit
from vsplit.privacy.audit import AuditData
from vsplit.privacy.synthetic import make_imbalanced_views, split_views

KEYS = {
    "defense", "test_auc", "norm_leak_auc", "direction_leak_auc", "model_completion_excess_auc", "reconstruction_r2",
}


pytestmark = pytest.mark.usefixtures("one_thread")


def small(seed: int) -> AuditData:
    train, test = split_views(make_imbalanced_views(1000, seed=seed), seed=seed)
    return AuditData(name="small", train=train, test=test, label_party="bank", label="y", positive_label=1)


@pytest.fixture
def small_presets(monkeypatch):
    """Stand a small synthetic data set in for the bundled presets, so the command runs in seconds."""
    asked: list[tuple[str, int]] = []

    def fake_preset(name: str, *, seed: int = 0) -> AuditData:
        asked.append((name, seed))
        return small(seed)

    monkeypatch.setattr(vsplit.datasets, "preset", fake_preset)
    return asked


@pytest.mark.slow  # covered by benchmarks/privacy_audit.py (every defense over seeds)
def test_audit_averages_each_defense_setting_over_seeds_and_prices_it_against_none():
    report = audit(small, defenses=["none", "label_dp:epsilon=1"], seeds=2, epochs=2, known_labels=[40], aux_rows=80)
    rows = report.rows()
    assert [r["defense"] for r in rows] == ["none", "label_dp:epsilon=1"]
    assert all(KEYS <= set(r) and r["n_seeds"] == 2 for r in rows)
    none, rr = rows
    assert none["test_auc_cost"] == 0
    runs = [r for r in report.runs if r["defense"] == "label_dp:epsilon=1"]
    assert rr["test_auc"] == pytest.approx(sum(r["test_auc"] for r in runs) / 2)
    assert rr["epsilon"] == 1.0 and rr["cost.flipped_fraction"] > 0.1
    assert "| label_dp:epsilon=1 |" in report.table()


def test_cli_prints_one_json_list_and_writes_the_report_atomically(small_presets, tmp_path, capsys):
    out = tmp_path / "audit"
    code = main([
        "privacy", "audit", "--preset", "default_credit", "--defense", "none", "--defense", "clip_noise",
        "--seeds", "2", "--epochs", "2", "--known-labels", "40", "--aux-rows", "80", "--json", "--out", str(out),
        "--quiet",
    ])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and [r["defense"] for r in rows] == ["none", "clip_noise"]
    assert all(KEYS <= set(r) for r in rows)
    assert small_presets == [("default_credit", 0), ("default_credit", 1)]
    assert sorted(p.name for p in out.iterdir()) == ["privacy_utility.png", "report.json", "report.md"]  # no temp
    assert (out / "privacy_utility.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out / "report.json").read_text())
    assert len(saved["runs"]) == 4 and saved["settings"]["seeds"] == [0, 1]


def test_cli_names_the_valid_defenses_when_given_an_unknown_one(small_presets, capsys):
    assert main(["privacy", "audit", "--preset", "bank_marketing", "--defense", "magic", "--quiet"]) == 1
    assert "choose one of: clip_noise" in capsys.readouterr().err
    assert small_presets == []  # refused before any training


def test_cli_lists_defenses_and_named_settings(capsys):
    assert main(["privacy", "defenses"]) == 0
    listing = capsys.readouterr().out
    assert "marvell" in listing and "secretflow_label_dp" in listing and "epsilon=64" in listing


def test_public_api_is_pinned():
    import vsplit.privacy

    assert sorted(vsplit.privacy.__all__) == sorted([
        "ATTACKS", "DEFAULT_AUDIT_DEFENSES", "DEFENSES", "AuditData", "AuditReport", "Defense", "DirectionScoring",
        "EmbeddingTap", "Guarantee", "HijackMonitor", "NormScoring", "audit", "leak_auc", "make_defense",
        "merge_hooks", "model_completion", "reconstruct_features", "run_once",
        # the other topologies
        "FshaServer", "TopologyReport", "audit_topology", "black_box_inversion", "make_detector",
        "white_box_inversion",
    ])
    assert all(hasattr(vsplit.privacy, name) for name in vsplit.privacy.__all__)
