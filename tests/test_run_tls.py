"""Two OS processes train the bank-marketing model over mutual TLS and reach the in-process parameters.

On the preset's first 2,500 training and 600 test customers: equality does not depend on the row count, and every
case still runs dozens of batches an epoch (the batch fitted to the rows: many windows of 4 ahead)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from _pilot_support import free_port, small, start, wait_all, write_configs

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.pilot.prepare import prepare_preset
from vsplit.runtime.checkpoint import load_checkpoint

EPOCHS = 2


@pytest.fixture(scope="module")
def bank_marketing():
    return small(preset("bank_marketing", seed=0), 2500, 600)


AHEAD = {"exact": {}, "window_4": {"pipeline_window": 4}, "local_3": {"local_steps": 3}}
#: [train] options each party applies to its own optimizer and parameters: a cosine learning rate over the epochs and
#: a moving average of the parameters (two epochs, so the rate changes)
SCHEDULE = {"lr_schedule": "cosine", "ema": 0.9}
#: the opt-in recipe of docs/models.md: piecewise-linear numeric embeddings in every bottom, a top of two heads
RECIPE = {"numeric_embedding": "piecewise", "members": 2}
#: the schedule and the recipe are each party's own computation: one run shows both (one run fewer for the suite)
CASES = {**{k: (v, {}) for k, v in AHEAD.items()}, "piecewise_ensemble_cosine_ema": (SCHEDULE, RECIPE)}


@pytest.mark.parametrize(("ahead", "model"), CASES.values(), ids=CASES.keys())
def test_two_processes_over_tls_reach_the_in_process_parameters(tmp_path, bank_marketing, ahead, model):
    """Exact and running ahead: what a party sends depends only on what it has received, not on timing; the same
    with the recipe's numeric embeddings (bins fitted on each party's own rows) and ensemble top."""
    prepare_preset(bank_marketing, tmp_path)
    # running ahead drains at every epoch's end: one epoch shows it
    epochs = EPOCHS if not (ahead or model) or "lr_schedule" in ahead else 1
    settings = "".join(f"{key} = {json.dumps(value)}\n" for key, value in ahead.items())
    recipe = "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in model.items())
    configs = write_configs(tmp_path, port=free_port(), run_id="tls-equals-inprocess",
                            extra=f"[train]\nepochs = {epochs}\n{settings}" + (f"[model]\n{recipe}" if model else ""))
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    procs = {p: start(["run", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=240)

    # party processes run torch with one thread (train.threads); so does the reference, since a parallel reduction
    # may add floats in another order
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        clf = SplitClassifier(label_party="bank", label="y", positive_label="yes", epochs=epochs, random_state=0,
                              candidates="network", **ahead, **model)
        clf.fit(bank_marketing.train)
    finally:
        torch.set_num_threads(threads)

    runs = tmp_path / "runs" / "tls-equals-inprocess"
    bank = load_checkpoint(runs / "bank" / "model.npz", run_id="tls-equals-inprocess", party="bank")
    partner = load_checkpoint(runs / "partner" / "model.npz", run_id="tls-equals-inprocess", party="partner")
    expected = {
        "bank bottom": (bank["segments"]["bank"], clf.label_party_.model.state_dict()),
        "top": (bank["segments"]["top"], clf.label_party_.top.state_dict()),
        "partner bottom": (partner["segments"]["partner"], clf.feature_parties_["partner"].model.state_dict()),
    }
    for what, (got, want) in expected.items():
        assert got.keys() == want.keys(), what
        for key in want:
            assert torch.equal(got[key], want[key]), f"{what}: {key} differs"
    # the partner's saved part holds nothing of the bank's, and the other way round
    assert "top" not in partner and "label" not in partner
    assert set(bank["segments"]) == {"bank", "top"} and set(partner["segments"]) == {"partner"}
    assert all(np.isfinite(v.numpy()).all() for v in bank["segments"]["bank"].values())
    if model:  # the recipe really ran: embedded numeric columns, two heads
        keys = list(bank["segments"]["bank"])
        assert any("numeric" in key or "embed" in key for key in keys), keys
