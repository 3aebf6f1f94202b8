"""Kill the partner's process mid-training, restart both with --resume: the result equals an uninterrupted run."""

from __future__ import annotations

import json
import time

import pytest
from _pilot_support import free_port, in_process_metrics, start, wait_all, write_configs

from vsplit.datasets import preset
from vsplit.pilot.prepare import prepare_preset

EPOCHS, BATCH = 4, 32
SETTINGS = f"[train]\nepochs = {EPOCHS}\nbatch_size = {BATCH}\npatience = 10\n"


def test_partner_killed_mid_epoch_then_both_resume_to_the_uninterrupted_result(tmp_path):
    data = preset("secretflow_bank")
    prepare_preset(data, tmp_path)
    port = free_port()
    configs = write_configs(tmp_path, port=port, run_id="resume", extra=SETTINGS)
    logs = {p: tmp_path / f"{p}-1.log" for p in configs}
    procs = {p: start(["train", "--config", str(c), "--quiet", "--set", "output.baselines=false",
                       "--set", "network.reconnect_timeout_s=2"], log=logs[p])  # the killed partner never reconnects
             for p, c in configs.items()}
    checkpoints = tmp_path / "runs" / "resume" / "partner" / "checkpoints"
    deadline = time.monotonic() + 180
    while not (checkpoints / "epoch-0001.npz").exists():
        assert time.monotonic() < deadline, logs["partner"].read_text()[-2000:]
        assert procs["partner"].poll() is None, "partner finished before it could be killed"
        time.sleep(0.01)
    time.sleep(0.1)  # into epoch 2
    procs["partner"].kill()
    assert procs["partner"].wait(timeout=30) != 0
    assert procs["bank"].wait(timeout=120) == 1  # the bank stops cleanly when its peer drops
    bank_log = logs["bank"].read_text()
    assert "vsplit: error:" in bank_log and "Traceback" not in bank_log

    logs = {p: tmp_path / f"{p}-2.log" for p in configs}
    procs = {p: start(["train", "--config", str(c), "--quiet", "--resume", "--set", "output.baselines=false"],
                      log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=240)

    report = json.loads((tmp_path / "runs" / "resume" / "bank" / "report.json").read_text())
    expected = in_process_metrics(data, epochs=EPOCHS, batch_size=BATCH, patience=10)
    assert [h["epoch"] for h in report["history"]] == list(range(EPOCHS))
    for key in ("auc", "ks", "accuracy", "f1", "log_loss"):
        assert report["metrics"][key] == pytest.approx(expected[key], abs=1e-9), key


def test_resume_without_a_checkpoint_is_refused(tmp_path):
    data = preset("secretflow_bank")
    prepare_preset(data, tmp_path)
    configs = write_configs(tmp_path, port=free_port(), run_id="never-ran")
    log = tmp_path / "bank.log"
    # no partner runs: the bank's wait to tell it why it stops (vsplit.node.early) is cut to the connect timeout
    proc = start(["train", "--config", str(configs["bank"]), "--resume", "--quiet",
                  "--set", "network.connect_timeout_s=2"], log=log)
    assert proc.wait(timeout=120) == 1
    assert "--resume given but no checkpoint" in log.read_text()
