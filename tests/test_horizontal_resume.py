"""Resume a horizontal run after a kill: every party restarts with --resume at the first round all had finished,
and the final parameters equal an uninterrupted run's, bit for bit (three banks and a server as OS processes over
mutual TLS; the reference runs every party in one process)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import torch

from tests._pilot_support import start, wait_all
from tests.test_horizontal_processes import _segments
from vsplit.config import load_config
from vsplit.pilot.horizontal import prepare_horizontal
from vsplit.runtime.horizontal_node import HorizontalNode, run_in_process


@pytest.mark.parametrize("schedule", ["splitfed_v2", "sequential"])
def test_resume_after_kill_equals_uninterrupted(tmp_path: Path, schedule: str) -> None:
    run_id = f"resume-{schedule}"
    kwargs = {"banks": 3, "run_id": run_id, "rows": 160, "schedule": {"kind": schedule, "order": "random"},
              "train": {"epochs": 4, "batch_size": 16}}
    configs = prepare_horizontal(tmp_path / "tls", **kwargs)
    reference = prepare_horizontal(tmp_path / "mem", **kwargs)
    run_in_process([HorizontalNode(load_config(p)) for p in reference.values()])

    logs = {p: tmp_path / f"{p}.log" for p in configs}
    procs = {p: start(["run", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    mark = tmp_path / "tls" / "runs" / run_id / "server" / "checkpoints" / "round-0001.npz"
    deadline = time.monotonic() + 90
    while not mark.exists() and time.monotonic() < deadline and procs["server"].poll() is None:
        time.sleep(0.005)
    procs["server"].send_signal(signal.SIGKILL)
    codes = {p: proc.wait(timeout=60) for p, proc in procs.items()}
    # killed mid-run; a bank that had finished all its turns (sequential, random order) may have ended cleanly
    assert codes["server"] == -signal.SIGKILL and set(codes.values()) - {-signal.SIGKILL} <= {0, 1}, codes
    stopped = [p for p, c in codes.items() if c == 1]
    assert stopped, codes
    for p in stopped:
        assert "server" in logs[p].read_text()  # the error names the peer that went away

    logs = {p: tmp_path / f"{p}-resumed.log" for p in configs}
    procs = {p: start(["run", "--config", str(c), "--quiet", "--resume"], log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=120)
    import json

    result = json.loads((tmp_path / "tls" / "runs" / run_id / "server" / "result.json").read_text())
    assert result["start_round"] >= 2  # it did resume, from the rounds every party had finished
    for party in configs:
        got, want = _segments(tmp_path / "tls", run_id, party), _segments(tmp_path / "mem", run_id, party)
        assert got.keys() == want.keys() and got
        for name in want:
            assert torch.equal(got[name], want[name]), f"{party} {name}: the resumed run differs"
