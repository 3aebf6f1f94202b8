"""A vanilla client's detectors switched on in its party.toml, with the client and the server as OS processes over
mutual TLS: an honest run ends with no alarm and bit for bit the parameters of the same split without detectors; a
detector that fires stops both processes with an error naming it, and the server learns only "cancelled"."""

from __future__ import annotations

import pytest
import torch
from _pilot_support import free_port, start, wait_all, write_configs

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.pilot.orchestrate import pilot_data
from vsplit.pilot.prepare import ensure_keys, export_tables
from vsplit.privacy.detectors import plant_canaries
from vsplit.runtime.checkpoint import load_checkpoint

ROLES = {"bank": "label", "partner": "feature"}
RUN = "detectors"


@pytest.fixture(scope="module")
def tables():
    """Vanilla tables of the secretflow_bank preset, with canary rows planted in what the partner hands the bank."""
    data = pilot_data(preset("secretflow_bank", seed=0), "vanilla")
    partner, bank, canary_ids = plant_canaries(data.train["partner"], data.train["bank"], fraction=0.05, seed=0,
                                               label="y", classes=["no", "yes"])
    data.train["bank"], data.train["partner"] = bank.reset_index(drop=True), partner.reset_index(drop=True)
    return data, set(canary_ids)


def _client_table(data, canaries):
    """The partner's table as its operator keeps it: the labels it handed over and the canary flags beside its rows."""
    handed = data.train["bank"].set_index("customer_id")["y"]
    partner = data.train["partner"]
    return partner.assign(handed=partner["customer_id"].map(handed).to_numpy(),
                          canary=partner["customer_id"].isin(canaries).to_numpy())


def _run(tmp_path, data, canaries, detectors: str, *, epochs: int, extra: str = "") -> dict:
    export_tables(data, tmp_path)
    _client_table(data, canaries).to_parquet(tmp_path / "partner" / "data" / "train.parquet", index=False)
    ensure_keys(tmp_path, list(ROLES))
    configs = write_configs(tmp_path, port=free_port(), run_id=RUN, kind="vanilla", roles=ROLES,
                            extra=f"[train]\nepochs = {epochs}\n")
    text = configs["partner"].read_text()
    configs["partner"].write_text(text + f'[privacy]\ndetectors = [{detectors}]\ndetector_labels = "handed"\n{extra}')
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    procs = {p: start(["run", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    return {"procs": procs, "logs": logs}


def test_honest_training_raises_no_alarm_and_detectors_leave_training_unchanged(tmp_path, tables):
    data, canaries = tables
    run = _run(tmp_path, data, canaries, '"gradient_scrutinizer", "splitguard:start=10"', epochs=1,
               extra='canary_column = "canary"\n')
    wait_all(run["procs"], run["logs"], timeout=240)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the party processes (train.threads = 1): same float reductions
    try:
        clf = SplitClassifier(label_party="bank", label="y", positive_label="yes", epochs=1, random_state=0,
                              topology="vanilla").fit(data.train)
    finally:
        torch.set_num_threads(threads)
    for party in ROLES:
        saved = load_checkpoint(tmp_path / "runs" / RUN / party / "model.npz", run_id=RUN, party=party)
        for seg, state in saved["segments"].items():
            for key, value in clf._party(party).segment_models[seg].state_dict().items():
                assert torch.equal(state[key], value), f"{party}/{seg}/{key}"


def test_a_detector_that_fires_stops_the_client_and_the_server_with_an_error_naming_it(tmp_path, tables):
    data, canaries = tables
    # a threshold no honest gap reaches (1.99 would need opposite gradients across labels): it fires at once
    run = _run(tmp_path, data, canaries, '"gradient_scrutinizer:threshold=1.99,window=1"', epochs=1)
    codes = {p: proc.wait(timeout=240) for p, proc in run["procs"].items()}
    partner, bank = (run["logs"][p].read_text() for p in ("partner", "bank"))
    assert codes == {"bank": 1, "partner": 1}, (partner[-2000:], bank[-2000:])
    assert "detector 'gradient_scrutinizer' flagged the gradients received at epoch 0" in partner
    assert "stopped before sending its next activations" in partner
    assert "stopped by its operator" in bank and "gradient_scrutinizer" not in bank
    assert not (tmp_path / "runs" / RUN / "partner" / "model.npz").exists()
