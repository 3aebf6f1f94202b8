"""benchmarks/clients.py: its smallest path prints one JSON object with every schedule's figures."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "clients.py"
SCHEDULES = {"sequential", "splitfed_v1", "splitfed_v2", "fedavg", "split", "pooled", "best_bank_alone"}
ROWS = 200


@pytest.mark.slow  # covered by benchmarks/clients.py itself (results-clients.json)
def test_one_entry_one_seed_one_round_reports_every_schedule() -> None:
    args = ["--only", "iid/3", "--seeds", "1", "--rounds", "1", "--rows", str(ROWS), "--secure-aggregation", "off"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {"load_average", "seconds", "iid/3", "transport", "secure_aggregation"}
    assert report["transport"] == "tls"  # every party of a schedule its own process over mutual TLS
    assert set(report["load_average"]) == {"start", "end"}
    entry = report["iid/3"]
    assert SCHEDULES <= set(entry) and entry["seeds"] == [0]
    assert set(entry["skew"]["0"]) == {"bank_1", "bank_2", "bank_3"}
    for name in SCHEDULES:
        figures = entry[name]
        assert 0.0 < figures["auc"] < 1.0 and len(figures["auc_per_seed"]) == 1, name
        assert figures["rounds"] == figures["epochs"] == 1 and figures["settings"], name
        over_tls = name not in ("pooled", "best_bank_alone")  # the baselines train in one place
        assert figures["epoch_s" if over_tls else "epoch_s_in_process"] > 0, name
    # 23 -> 32 -> 16 on 200 rows: forward 2*200*(23*32 + 32*16), backward twice that minus the first layer's input
    # gradient, which training never computes
    forward = 2 * ROWS * (23 * 32 + 32 * 16)
    assert entry["splitfed_v1"]["client_flops_per_epoch"] == 3 * forward - 2 * ROWS * 23 * 32
    assert entry["fedavg"]["client_flops_per_epoch"] > entry["splitfed_v1"]["client_flops_per_epoch"]
    # a split client sends at least its cut activations (200 rows x 16 float32); FedAvg only its weights
    activations = ROWS * 16 * 4
    for name in ("sequential", "splitfed_v1", "splitfed_v2"):
        assert entry[name]["bytes_per_client_epoch"] > activations, name
    weights = 4 * (23 * 32 + 32 + 32 * 16 + 16 + 16 * 16 + 16 + 17)
    assert weights < entry["fedavg"]["bytes_per_client_epoch"] < activations
    assert entry["best_bank_alone"]["bytes_per_client_epoch"] == 0 and entry["best_bank_alone"]["bank_per_seed"]


def test_run_schedule_takes_another_runner_and_names_its_timing() -> None:
    spec = importlib.util.spec_from_file_location("clients_benchmark", SCRIPT)
    clients = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = clients  # its dataclasses look their module up
    spec.loader.exec_module(clients)
    calls = []

    def runner(h, settings, banks, server):
        calls.append(sorted(banks))
        return clients.in_process(h, settings, banks, server)

    entry = clients.ENTRIES["iid/3"]
    split, test = clients.load_split(entry, 0, max_rows=64)
    init = clients.make_model(entry, 0, rounds=1)
    settings = clients.settings_for("splitfed_v1", rounds=1, batch_size=32, seed=0)
    out = clients.run_schedule("splitfed_v1", settings, split, init, test, 0, runner=runner, timing_key="epoch_s")
    assert calls == [["bank_1", "bank_2", "bank_3"]]
    assert out["epoch_s"] > 0 and "epoch_s_in_process" not in out
