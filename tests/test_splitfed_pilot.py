"""The splitfed-credit pilot's report, from a run with every party in one process (the pilot itself runs them as
processes: tests/test_horizontal_processes.py covers that path)."""

from __future__ import annotations

from pathlib import Path

from vsplit.config import load_config
from vsplit.node.horizontal import HorizontalNode, run_in_process
from vsplit.pilot.horizontal import prepare_horizontal
from vsplit.pilot.splitfed import _report, render


def test_report_has_every_banks_view_and_the_baselines(tmp_path: Path) -> None:
    configs = prepare_horizontal(tmp_path, banks=3, port=7992, run_id="pilot", rows=800, federated=True,
                                 train={"epochs": 4, "batch_size": 64})
    loaded = {p: load_config(c) for p, c in configs.items()}
    run_in_process([HorizontalNode(c) for c in loaded.values()])
    report = _report(tmp_path / "runs" / "pilot", loaded)
    assert set(report["banks"]) == {"bank_1", "bank_2", "bank_3"}
    for bank in report["banks"].values():
        assert 0.5 < bank["auc"] <= 1 and bank["test_rows"] == 200 and bank["train_rows"] == 800
        assert bank["bytes_sent"] > 0 and set(bank["by_peer"]) == {"server", "fedserver"}
    assert report["pooled_test"]["test_rows"] == 600
    assert set(report["baselines"]) == {"best_bank_alone", "pooled"}
    assert set(report["views"]) == set(configs) and report["views"]["server"]["round_seconds"] == [0.0] * 4
    report["seconds"] = 1.0
    text = render(report)
    assert "bank_3" in text and "best bank alone" in text
