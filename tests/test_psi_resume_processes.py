"""A party killed mid-PSI stops the others cleanly; rerunning all three over mutual TLS resumes from the finished
buckets and finds exactly the customers all three share.

Three OS processes (bank listening, shop and telco dialing) run ``vsplit psi`` with 24 buckets on tables three
twice the bundled sample's size, so the PSI runs long enough to be killed part-way.
"""

from __future__ import annotations

import json

import pandas as pd
from _pilot_support import free_port, kill_after_buckets, start, wait_all
from _three_party_support import prepare_three_parties

from vsplit.runtime.psi import load_rows

EXTRA = "[psi]\nbuckets = 24\n"
COPIES = 2


def _grow(configs) -> dict[str, set[str]]:
    """Each party's training table twice over (new IDs, same overlap); returns each party's IDs."""
    ids = {}
    for party, config in configs.items():
        path = config.parent / "data" / "train.parquet"
        table = pd.read_parquet(path)
        copies = [table.assign(customer_id=table["customer_id"].astype(str) + f"-{i}") for i in range(COPIES)]
        grown = pd.concat(copies, ignore_index=True)
        grown.to_parquet(path, index=False)
        ids[party] = set(grown["customer_id"])
    return ids


def _launch(root, configs, tag):
    logs = {p: root / f"{p}-{tag}.log" for p in configs}
    short = ["--set", "network.reconnect_timeout_s=2"]  # a killed process never comes back: give up after 2 s
    return {p: start(["psi", "--config", str(c), "--quiet", *short], log=logs[p]) for p, c in configs.items()}, logs


def test_a_party_killed_mid_psi_resumes_with_the_others_from_the_finished_buckets(tmp_path):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="psi-resume", extra=EXTRA)
    ids = _grow(configs)
    run = tmp_path / "runs" / "psi-resume"
    state = run / "telco" / "psi-state" / "psi" / "bank" / "state.json"
    procs, logs = _launch(tmp_path, configs, "first")
    kill_after_buckets(procs["telco"], state, logs["telco"], buckets=2)  # telco, once it has finished two buckets
    for party in ("bank", "shop"):
        assert procs[party].wait(timeout=60) == 1, logs[party].read_text()[-2000:]
    procs["telco"].wait(timeout=10)
    bank, shop = logs["bank"].read_text(), logs["shop"].read_text()
    assert "Traceback" not in bank + shop
    assert "'telco'" in next(line for line in bank.splitlines() if line.startswith("vsplit: error:")), bank
    assert not (run / "bank" / "alignment.csv").exists()
    assert json.loads(state.read_text())["done"] < 24  # killed part-way

    procs, logs = _launch(tmp_path, configs, "again")
    wait_all(procs, logs, timeout=180)
    shared = set.intersection(*ids.values())
    aligned = {p: pd.read_csv(run / p / "alignment.csv", dtype={"customer_id": str}) for p in configs}
    for party, table in aligned.items():  # the same customers, in the same order, at every party
        assert set(table["customer_id"]) == shared, party
        assert table["customer_id"].tolist() == aligned["bank"]["customer_id"].tolist()
    for party, table in aligned.items():  # the rows also as a memory-mappable array
        assert load_rows(run / party / "alignment.npy").tolist() == table["row"].tolist()
    stats = {p: json.loads((run / p / "psi.json").read_text()) for p in configs}
    assert stats["bank"]["intersection"] == len(shared)
    assert stats["telco"]["resumed_buckets"]["bank"] >= 2
    assert stats["bank"]["resumed_buckets"]["telco"] >= 2
    for party in configs:
        assert not (run / party / "psi-state").exists()  # forgotten once the alignment is written
