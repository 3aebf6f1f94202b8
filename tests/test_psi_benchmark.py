"""The PSI benchmark runs two parties as separate processes over a local socket and checks their agreement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "psi.py"


def test_benchmark_runs_two_processes_and_reports_one_json_object() -> None:
    args = ["--size", "3000", "--partner-size", "2000", "--overlap", "0.25", "--workers", "1"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sizes"] == {"label": 3000, "partner": 2000}
    assert report["intersection"] == 500 and report["verified"] is True
    assert set(report["peak_rss_mb"]) == set(report["bytes_sent"]) == {"label", "partner"}
    assert report["bytes_sent"]["label"] > 32 * (3000 + 2000)
