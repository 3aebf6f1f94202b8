"""Resume a horizontal run after a kill: every party restarts with --resume at the first round all had finished,
and the final parameters equal an uninterrupted run's, bit for bit. Sequential (relayed, sealed, random order): three
banks and a server as OS processes over mutual TLS, the server killed mid-run. Every schedule: in one process, the
run stopped at a frame in the middle of its rounds (all parties at once), then resumed."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import torch

from tests._horizontal_support import hand_secrets
from tests._pilot_support import start, wait_all
from tests.test_horizontal_processes import _segments
from vsplit.config import load_config
from vsplit.node.horizontal import HorizontalNode, run_in_process
from vsplit.pilot.horizontal import prepare_horizontal


@pytest.mark.parametrize("schedule", ["sequential"])  # the other schedules: in one process, below
def test_resume_after_kill_equals_uninterrupted(tmp_path: Path, schedule: str) -> None:
    run_id = f"resume-{schedule}"
    kwargs = {"banks": 3, "run_id": run_id, "rows": 160, "schedule": {"kind": schedule, "order": "random"},
              "train": {"epochs": 4, "batch_size": 16}}
    configs = prepare_horizontal(tmp_path / "tls", **kwargs)
    reference = prepare_horizontal(tmp_path / "mem", **kwargs)
    for prepared in (configs, reference):  # the same secrets: the same initial weights and dropout
        hand_secrets(prepared)
    run_in_process([HorizontalNode(load_config(p)) for p in reference.values()])

    logs = {p: tmp_path / f"{p}.log" for p in configs}
    short = ["--set", "network.reconnect_timeout_s=2"]  # a killed process never comes back: give up after 2 s
    procs = {p: start(["run", "--config", str(c), "--quiet", *short], log=logs[p]) for p, c in configs.items()}
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


class _Stop(Exception):
    pass


@pytest.mark.parametrize("schedule", ["sequential", "splitfed_v1", "splitfed_v2", "fedavg"])
def test_every_schedule_resumes_to_the_uninterrupted_parameters(tmp_path: Path, schedule: str) -> None:
    kwargs = {"banks": 3, "run_id": "resume", "rows": 120, "federated": schedule == "splitfed_v1",
              "schedule": {"kind": schedule, "order": "random"}, "train": {"epochs": 4, "batch_size": 16}}
    reference = prepare_horizontal(tmp_path / "whole", **kwargs)
    hand_secrets(reference)
    frames: list[int] = []
    run_in_process([HorizontalNode(load_config(p)) for p in reference.values()],
                   taps=[lambda s, r, m, f: frames.append(1)])
    configs = prepare_horizontal(tmp_path / "cut", **kwargs)
    hand_secrets(configs)
    sent = 0

    def stop_halfway(sender, recipient, message, frame) -> None:
        nonlocal sent
        sent += 1
        if sent == len(frames) // 2:
            raise _Stop

    with pytest.raises(_Stop):
        run_in_process([HorizontalNode(load_config(p)) for p in configs.values()], taps=[stop_halfway])
    resumed = run_in_process([HorizontalNode(load_config(p), resume=True) for p in configs.values()])
    assert resumed["server"].start_round >= 1
    for party in configs:
        saved = tmp_path / "whole" / "runs" / "resume" / party / "model.npz"
        if not saved.exists():  # a federated server, or the FedAvg server, owns no segment
            assert party in ("fedserver", "server") and schedule in ("splitfed_v1", "fedavg")
            continue
        got, want = _segments(tmp_path / "cut", "resume", party), _segments(tmp_path / "whole", "resume", party)
        assert got.keys() == want.keys() and got
        for name in want:
            assert torch.equal(got[name], want[name]), f"{schedule}: {party} {name} differs after the resume"
