"""Vanilla and U-shaped splits as separate OS processes over mutual TLS: training, scoring and prediction complete,
and every party ends with bit for bit the parameters of the same split run in one process."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from _pilot_support import free_port, start, wait_all, write_configs

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.evaluation import shared_test_views
from vsplit.pilot.orchestrate import pilot_data
from vsplit.pilot.prepare import ensure_keys, export_tables
from vsplit.runtime.checkpoint import load_checkpoint

EPOCHS = 2
ROLES = {"vanilla": {"bank": "label", "partner": "feature"}, "u_shaped": {"bank": "label", "cloud": "compute"}}


@pytest.fixture(scope="module")
def secretflow_bank():
    return preset("secretflow_bank", seed=0)


@pytest.mark.parametrize("kind", ["vanilla", "u_shaped"])
def test_processes_over_tls_reach_the_in_process_parameters_and_predictions(tmp_path, secretflow_bank, kind):
    tables = pilot_data(secretflow_bank, kind)
    roles = ROLES[kind]
    export_tables(tables, tmp_path)
    ensure_keys(tmp_path, list(roles))
    run_id = f"{kind}-tls"
    configs = write_configs(tmp_path, port=free_port(), run_id=run_id, kind=kind, roles=roles,
                            extra=f"[train]\nepochs = {EPOCHS}\n")
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    wait_all({p: start(["run", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}, logs,
             timeout=240)
    inputs = {p: ["--input", str(tmp_path / p / "data" / "test.parquet")] for p in tables.test}
    wait_all({p: start(["predict", "--config", str(c), "--quiet", "--job", "j", *inputs.get(p, [])], log=logs[p])
              for p, c in configs.items()}, logs, timeout=240)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the party processes (train.threads = 1): same float reductions
    try:
        clf = SplitClassifier(label_party="bank", label="y", positive_label="yes", epochs=EPOCHS, random_state=0,
                              topology=kind, server="cloud").fit(tables.train)
        test = shared_test_views(tables.test, label_party="bank", id_column="customer_id")
        expected = clf.predict_proba(test)[:, 1]
    finally:
        torch.set_num_threads(threads)

    runs = tmp_path / "runs" / run_id
    for party in roles:
        saved = load_checkpoint(runs / party / "model.npz", run_id=run_id, party=party)
        own = clf._party(party).segment_models
        assert set(saved["segments"]) == {s.name for s in clf.topology_.segments_of(party)}
        for seg, state in saved["segments"].items():
            for key, value in own[seg].state_dict().items():
                assert torch.equal(state[key], value), f"{party}/{seg}/{key}"
    with open(runs / "bank" / "predictions" / "j" / "predictions.csv") as handle:
        got = {row["customer_id"]: row for row in csv.DictReader(handle)}
    ids = test["bank"]["customer_id"].astype(str).tolist()
    np.testing.assert_allclose([float(got[i]["probability"]) for i in ids], expected, rtol=0, atol=1e-12)
    report = (runs / "bank" / "report.md").read_text()
    assert "split (all parties)" in report
    if kind == "u_shaped":
        assert "cloud" not in (tmp_path / "bank" / "data").as_posix() and not (tmp_path / "cloud" / "data").exists()
