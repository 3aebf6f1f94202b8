"""benchmarks/boosting.py on a small cut of bank-full (1024-bit test keys): its whole path prints one JSON object
with issue 46's keys; the two-process trees equal the pooled ones and those the same machines grow in one process;
the scale section runs two processes and reports each one's peak memory; an existing ``serve`` key survives
``--no-serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("heu")
pytest.importorskip("xgboost")

from vsplit.config.boosting import SMALL_KEYS_ENV

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "boosting.py"


@pytest.mark.slow  # covered by benchmarks/boosting.py itself (results-boosting.json)
def test_quick_run_reports_every_figure_with_the_issue_key_names(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"serve": {"live": {"p99_ms": 1.0}}}))  # kept when serving is not re-run
    args = ["--quick", "--sample", "1500", "--trees", "2", "--early-stopping", "1", "--key-bits", "1024",
            "--scale-rows", "3000", "--scale-columns", "6", "--no-serve", "--out", str(out)]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **{SMALL_KEYS_ENV: "1"}))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report == json.loads(out.read_text())
    head = report["bank_full"]
    assert head["mode"] == "two_processes_mutual_tls" and 1 <= head["trees"] <= 2
    for key in ("seconds", "seconds_per_tree", "seconds_2_trees", "auc", "pooled_auc", "psi_seconds"):
        assert head[key] > 0, key
    assert head["same_trees"] is True and abs(head["auc"] - head["pooled_auc"]) <= 1e-3 >= head["auc_gap_max"]
    assert set(head["seeds"]) == {"0"} and head["seeds"]["0"]["auc"] == head["auc"]
    assert head["bytes_per_tree"]["to_partner"] > 0 and head["bytes_per_tree"]["to_bank"] > 0
    assert {"Gradients", "Level"} <= set(head["bytes_per_tree"]["by_message"]["to_partner"])
    split = head["split_s"]
    assert {"encryption", "histograms", "decryption", "wire_and_rest"} <= set(split)
    assert split["encryption"] > 0 and split["histograms"] > 0 and split["decryption"] > 0
    assert report["one_process"]["same_trees_as_two_processes"] is True
    assert report["xgboost"]["seconds"] > 0 and report["ratio_to_pooled_xgboost"] > 0
    scale = report["scale"]
    assert scale["rows"] == 3000 and scale["columns_per_party"] == 6 and scale["seconds_per_tree"] > 0
    assert set(scale["peak_rss_mb"]) == {"bank", "partner"} and min(scale["peak_rss_mb"].values()) > 10
    assert report["serve"] == {"live": {"p99_ms": 1.0}}
    assert set(report["load_average"]) == {"start", "end"} and report["settings"]["quick"] is True
