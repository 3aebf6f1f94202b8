"""A bank that drops mid-run: SplitFed finishes the run without it, sequential training stops cleanly.

Three banks and a server as OS processes over mutual TLS; bank_2 is killed once the server has finished round 1.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests._pilot_support import start
from tests.test_horizontal_processes import _segments
from vsplit.horizontal.averages import average
from vsplit.horizontal.machines import Aggregate
from vsplit.horizontal.messages import SegmentState
from vsplit.pilot.horizontal import prepare_horizontal


def _run_and_kill(tmp_path: Path, schedule: dict, run_id: str) -> tuple[dict, dict, Path]:
    configs = prepare_horizontal(tmp_path, banks=3, run_id=run_id, rows=160, schedule=schedule,
                                 train={"epochs": 5, "batch_size": 16})
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    short = ["--set", "network.reconnect_timeout_s=2"]  # a killed process never comes back: give up after 2 s
    procs = {p: start(["run", "--config", str(c), "--quiet", *short], log=logs[p]) for p, c in configs.items()}
    mark = tmp_path / "runs" / run_id / "server" / "checkpoints" / "round-0001.npz"
    deadline = time.monotonic() + 90
    while not mark.exists() and time.monotonic() < deadline and procs["bank_2"].poll() is None:
        time.sleep(0.005)
    procs["bank_2"].send_signal(signal.SIGKILL)
    codes = {p: proc.wait(timeout=90) for p, proc in procs.items()}
    assert codes["bank_2"] == -signal.SIGKILL, codes
    return codes, logs, tmp_path / "runs" / run_id


def test_splitfed_finishes_the_run_without_a_bank_that_dropped(tmp_path: Path) -> None:
    codes, logs, run_dir = _run_and_kill(tmp_path, {"kind": "splitfed_v1", "secure_aggregation": "off"}, "drop-sfl")
    assert all(codes[p] == 0 for p in ("server", "bank_1", "bank_3")), {p: logs[p].read_text()[-800:] for p in codes}
    result = json.loads((run_dir / "server" / "result.json").read_text())
    assert result["lost"] == ["bank_2"] and result["round_seconds"][-1] > 0  # the last round ran
    trained = {r["client"] for r in result["history"] if r["round"] == 4}
    assert trained == {"bank_1", "bank_3"}
    # the survivors got the same average of their client segments at the end of every round
    one, three = _segments(tmp_path, "drop-sfl", "bank_1"), _segments(tmp_path, "drop-sfl", "bank_3")
    assert one and all(torch.equal(one[k], three[k]) for k in one)
    assert not (run_dir / "bank_2" / "model.npz").exists()


def test_sequential_stops_cleanly_when_a_bank_drops(tmp_path: Path) -> None:
    codes, logs, run_dir = _run_and_kill(tmp_path, {"kind": "sequential", "route": "server"}, "drop-seq")
    assert codes["server"] == 1 and "bank_2" in logs["server"].read_text()
    assert {codes["bank_1"], codes["bank_3"]} <= {0, 1}
    assert not (run_dir / "server" / "model.npz").exists()  # no model from a run that did not finish
    from vsplit.runtime.checkpoint import load_checkpoint

    for path in (run_dir / "server" / "checkpoints").glob("round-*.npz"):  # every checkpoint still loads
        load_checkpoint(path, run_id="drop-seq", party="server")


def test_an_average_without_a_dropped_client_weights_the_others_by_their_rows() -> None:
    agg = Aggregate({"a": 1, "b": 2, "c": 3}, round=0, average=average)
    state = {c: {"w/x": np.array([float(v)], np.float32)} for c, v in (("a", 1), ("b", 7), ("c", 4))}
    assert agg.receive("a", SegmentState.pack(round=0, rows=1, arrays=state["a"])) == []
    agg.receive("c", SegmentState.pack(round=0, rows=3, arrays=state["c"]))
    out = agg.drop("b")
    assert agg.done and agg.dropped == ["b"] and [o.to for o in out] == ["a", "c"]
    assert agg.result["w/x"].tolist() == [pytest.approx((1 + 3 * 4) / 4)]
