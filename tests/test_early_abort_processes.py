"""A party that fails its own checks before training (or scoring) tells its peer at once (an abort code, never
text), as two OS processes over mutual TLS: the peer exits within seconds instead of waiting out its connect timeout
in silence."""

from __future__ import annotations

import time

import pytest
from _pilot_support import free_port, start, write_configs

from vsplit.datasets import preset
from vsplit.pilot.prepare import prepare_preset

#: the peers' connect and read timeouts in these tests (write_configs): a peer left untold would wait this long
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def data():
    from _pilot_support import small

    return small(preset("secretflow_bank", seed=0), 400, 100)


def _run_until_both_exit(root, configs) -> dict[str, tuple[int, float, str]]:
    """Start both parties; each one's exit code, the second it exited at, and its output."""
    logs = {p: root / f"{p}.log" for p in configs}
    began = time.monotonic()
    procs = {p: start(["train", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    return _until_both_exit(procs, logs, began)


def _until_both_exit(procs, logs, began: float) -> dict[str, tuple[int, float, str]]:
    """Wait for every process; each one's exit code, the second (since ``began``) it exited at, and its output."""
    ended: dict[str, float] = {}
    while len(ended) < len(procs):
        for p, proc in procs.items():
            if p not in ended and proc.poll() is not None:
                ended[p] = time.monotonic() - began
        assert time.monotonic() - began < 3 * TIMEOUT_S, {p: logs[p].read_text()[-1500:] for p in logs}
        time.sleep(0.05)
    return {p: (procs[p].returncode, ended[p], logs[p].read_text()) for p in procs}


def test_a_label_with_three_values_stops_the_partner_at_once(tmp_path, data):
    prepare_preset(data, tmp_path)
    bank_table = tmp_path / "bank" / "data" / "train.parquet"
    import pandas as pd

    table = pd.read_parquet(bank_table)
    table.loc[table.index[:5], "y"] = "maybe"  # a third value: the bank's own check fails before it listens
    table.to_parquet(bank_table, index=False)
    configs = write_configs(tmp_path, port=free_port(), run_id="three-values")

    out = _run_until_both_exit(tmp_path, configs)
    (bank_code, bank_end, bank_log), (partner_code, partner_end, partner_log) = out["bank"], out["partner"]
    assert bank_code == 1 and "3 distinct values" in bank_log and "topology.task" in bank_log, bank_log
    assert "telling partner (abort code 7)" in bank_log, bank_log
    assert partner_code == 1, partner_log
    assert "bank aborted" in partner_log and "(code 7)" in partner_log, partner_log
    # told, the partner stops with the bank (left untold it would dial on for its whole connect timeout)
    assert abs(partner_end - bank_end) < 10, (bank_end, partner_end)
    assert "maybe" not in partner_log  # the code only: nothing of the bank's data or message


def test_a_missing_id_column_at_the_partner_stops_the_bank_at_once(tmp_path, data):
    prepare_preset(data, tmp_path)
    configs = write_configs(tmp_path, port=free_port(), run_id="no-id-column")
    partner = configs["partner"]
    partner.write_text(partner.read_text().replace('id_column = "customer_id"', 'id_column = "client_no"'))

    out = _run_until_both_exit(tmp_path, configs)
    (bank_code, bank_end, bank_log), (partner_code, partner_end, partner_log) = out["bank"], out["partner"]
    assert partner_code == 1 and "data.id_column" in partner_log and "client_no" in partner_log, partner_log
    assert "data.*" not in partner_log
    assert bank_code == 1 and "partner aborted" in bank_log and "(code 7)" in bank_log, bank_log
    assert abs(bank_end - partner_end) < 10, (bank_end, partner_end)  # untold, it would listen on for 60 s
    assert "client_no" not in bank_log


def test_a_bank_whose_predict_input_is_missing_stops_the_partners_predict_at_once(tmp_path, data):
    """``vsplit predict`` too: the bank's --input names no file, so it stops before scoring and tells the partner in
    the prediction session; the partner stops with it instead of dialling on for its connect timeout."""
    from _pilot_support import wait_all

    prepare_preset(data, tmp_path)
    configs = write_configs(tmp_path, port=free_port(), run_id="predict-early", extra="[train]\nepochs = 1\n")
    logs = {p: tmp_path / f"{p}-train.log" for p in configs}
    wait_all({p: start(["train", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}, logs,
             timeout=180)
    inputs = {"bank": str(tmp_path / "bank" / "data" / "nope.parquet"),
              "partner": str(tmp_path / "partner" / "data" / "test.parquet")}
    logs = {p: tmp_path / f"{p}-predict.log" for p in configs}
    began = time.monotonic()
    procs = {p: start(["predict", "--config", str(c), "--quiet", "--job", "j", "--input", inputs[p]], log=logs[p])
             for p, c in configs.items()}
    out = _until_both_exit(procs, logs, began)
    (bank_code, bank_end, bank), (partner_code, partner_end, partner) = out["bank"], out["partner"]
    assert bank_code == 1 and "--input" in bank and "no such file" in bank, bank
    assert "stops before scoring; telling partner" in bank, bank
    assert partner_code == 1 and "bank aborted" in partner, partner
    assert abs(partner_end - bank_end) < 10, (bank_end, partner_end)  # untold, it would dial on for 60 s
    assert "nope.parquet" not in partner  # the code only: nothing of the bank's message
