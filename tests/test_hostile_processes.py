"""Issue 29 over separate OS processes and mutual TLS: 64 strangers flooding the bank's port while the partner dials
change nothing and leave a small log; a partner sending 3e38 activations stops the bank, which names it and writes no
model; every JSON of a run is strict; a truncated newest checkpoint is passed over by ``--resume``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _pilot_support import REPO, free_port, in_process_metrics, small, start, wait_all, write_configs
from _transport_support import make_identities  # noqa: F401  (puts benchmarks/ on the path)
from stranger_flood import Flood

from vsplit.datasets import preset
from vsplit.pilot.prepare import prepare_preset
from vsplit.strict_json import loads_strict

ROWS, TEST_ROWS, EPOCHS, BATCH = 400, 200, 2, 32
SETTINGS = f"[train]\nepochs = {EPOCHS}\nbatch_size = {BATCH}\npatience = 10\n"
LOG_MAX_MB = 0.02
COMMON = ["--quiet", "--set", "output.baselines=false", "--set", f"output.log_max_mb={LOG_MAX_MB}"]


@pytest.fixture(scope="module")
def data():
    return small(preset("secretflow_bank"), ROWS, TEST_ROWS)


@pytest.fixture(scope="module")
def expected(data):
    return in_process_metrics(data, epochs=EPOCHS, batch_size=BATCH, patience=10)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data):
    """Two runs started together (they share the processes' start-up time on a 2-core runner): one whose bank port
    is flooded by 64 idle strangers, reopening when closed, from its start to its end; one with a hostile partner
    (``tests/_hostile_partner.py``) sending 3e38 activations."""
    root = tmp_path_factory.mktemp("flooded")
    prepare_preset(data, root)
    port = free_port()
    configs = write_configs(root, port=port, run_id="flood", extra=SETTINGS)
    logs = {p: root / f"{p}-1.log" for p in configs}
    hostile = tmp_path_factory.mktemp("hostile")
    prepare_preset(data, hostile)
    bad = write_configs(hostile, port=free_port(), run_id="hostile", extra=SETTINGS)
    bad_logs = {p: hostile / f"{p}.log" for p in bad}
    flood = Flood(("127.0.0.1", port), n=64, limit_s=240).start()
    try:
        # strangers closed after 0.5 s of silence (1.5 s by default): each is closed, comes back and is closed again
        # within a run of a few seconds
        procs = {p: start(["run", "--config", str(c), *COMMON, "--set", "network.first_record_timeout_s=0.5"],
                          log=logs[p]) for p, c in configs.items()}
        bad_procs = {"bank": start(["run", "--config", str(bad["bank"]), *COMMON], log=bad_logs["bank"])}
        with open(bad_logs["partner"], "w") as handle:
            bad_procs["partner"] = subprocess.Popen(
                [sys.executable, "tests/_hostile_partner.py", "run", "--config", str(bad["partner"]), *COMMON],
                stdout=handle, stderr=subprocess.STDOUT, cwd=REPO)
        codes = {p: proc.wait(timeout=240) for p, proc in bad_procs.items()}
        wait_all(procs, logs, timeout=240)
    finally:
        flood.stop()
    return {"root": root, "configs": configs, "flood": flood, "hostile": hostile, "codes": codes, "logs": bad_logs}


def metrics(root: Path, run_id: str) -> dict:
    return loads_strict((root / "runs" / run_id / "bank" / "report.json").read_text())["metrics"]


def test_stranger_flood_changes_nothing_and_the_log_stays_small(runs, expected):
    root, flood = runs["root"], runs["flood"]
    assert flood.closed > 64  # every stranger was closed at least once, and came back
    got = metrics(root, "flood")
    for key in ("auc", "ks", "accuracy", "f1", "log_loss"):
        assert got[key] == pytest.approx(expected[key], abs=1e-9), key
    bank = root / "runs" / "flood" / "bank"
    text = (bank / "log.txt").read_text()
    assert "refused a connection: connection from 127.0.0.1" in text and "sent no whole TLS record" in text
    sizes = [p.stat().st_size for p in bank.glob("log.txt*")]
    assert len(sizes) <= 3 and max(sizes) <= LOG_MAX_MB * (1 << 20) + 4096, sizes


def test_every_json_of_a_run_is_strict(runs):
    root = runs["root"]
    found = sorted((root / "runs" / "flood").rglob("*.json"))
    assert {p.name for p in found} >= {"result.json", "report.json"}
    for path in found:
        loads_strict(path.read_text())  # NaN or Infinity would raise


def test_resume_passes_over_a_truncated_newest_checkpoint(runs, expected):
    root, configs = runs["root"], runs["configs"]
    checkpoints = sorted((root / "runs" / "flood" / "bank" / "checkpoints").glob("epoch-*.npz"))
    assert [p.name for p in checkpoints] == [f"epoch-{EPOCHS - 2:04d}.npz", f"epoch-{EPOCHS - 1:04d}.npz"]
    newest = checkpoints[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # a crash in mid-write, say
    logs = {p: root / f"{p}-2.log" for p in configs}
    procs = {p: start(["run", "--config", str(c), "--resume", *COMMON], log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=240)
    said = logs["bank"].read_text()
    assert f"passes over the unreadable {newest.name}" in said and f"resumes from epoch-{EPOCHS - 2:04d}.npz" in said
    report = loads_strict((root / "runs" / "flood" / "bank" / "report.json").read_text())
    assert [h["epoch"] for h in report["history"]] == list(range(EPOCHS))
    for key in ("auc", "ks", "accuracy", "f1", "log_loss"):
        assert report["metrics"][key] == pytest.approx(expected[key], abs=1e-9), key


def test_partner_sending_huge_activations_stops_the_bank_naming_it(runs):
    codes, logs = runs["codes"], runs["logs"]
    said = logs["bank"].read_text()
    assert codes["bank"] != 0 and codes["partner"] != 0, (codes, said[-2000:])
    assert "'partner' sent activations up to 3e+38 in magnitude, over train.max_abs_activation = 1e+30" in said, said
    assert "Traceback" not in said
    folder = runs["hostile"] / "runs" / "hostile"
    assert not list(folder.rglob("model.npz")) and not list(folder.rglob("report.json"))
