"""A bag of split networks in the pilot form (``[train] networks``): each organization's own process trains the
networks one after another over mutual TLS, and the bag equals :class:`vsplit.bagging.SplitBag` in one process.

The process test runs a bank and two partners (the three-way partition of the bundled bank sample,
tests/_three_party_support.py) on the plain small network for two epochs, with ``networks = 2``: training, then
``vsplit predict``, whose probabilities must be the mean of the two networks' as SplitBag computes it. The other
tests run the same node code in one process over memory channels (what crosses the cut; disagreeing configs) or only
load configs (bad values).
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
import torch
from _pilot_support import free_port, start, wait_all
from _plain import PLAIN_SET
from _three_party_support import COLUMNS, PARTNERS, prepare_three_parties

from vsplit.bagging import SplitBag
from vsplit.config import load_config
from vsplit.errors import CheckpointError, ConfigError, ProtocolError, RemoteAbort
from vsplit.models.recipe import PLAIN
from vsplit.protocol.training.messages import Activations, EpochEnd, Gradients, Ready, TrainingPlan
from vsplit.runtime.checkpoint import load_checkpoint
from vsplit.transport.memory import memory_pair

EPOCHS = 2
BAG = f"[train]\nepochs = {EPOCHS}\nnetworks = 2\n"


def _sets(*more: str) -> list[str]:
    return [x for item in (*PLAIN_SET, *more) for x in ("--set", item)]


def _launch(root, configs, command: list[str], tag: str, extra: dict[str, list[str]]) -> None:
    logs = {p: root / f"{p}-{tag}.log" for p in configs}
    procs = {p: start([*command, "--config", str(c), "--quiet", *extra.get(p, [])], log=logs[p])
             for p, c in configs.items()}
    wait_all(procs, logs, timeout=120)


def _views(root, split: str) -> dict[str, pd.DataFrame]:
    return {p: pd.read_parquet(root / p / "data" / f"{split}.parquet") for p in COLUMNS}


def _split_bag(root, networks: int) -> SplitBag:
    """SplitBag in this process on the same tables and seeds, with one torch thread as the party processes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return SplitBag(networks=networks, label_party="bank", label="y", positive_label="yes", random_state=0,
                        **{**PLAIN, "epochs": EPOCHS}).fit(_views(root, "train"))
    finally:
        torch.set_num_threads(threads)


def test_three_processes_train_a_bag_whose_predictions_equal_split_bag_in_one_process(tmp_path):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="bag", extra=BAG)
    _launch(tmp_path, configs, ["train"], "train", dict.fromkeys(configs, _sets()))
    run = tmp_path / "runs" / "bag"
    for party in COLUMNS:  # one model file per party, holding both networks' own parts (and nothing of a peer's)
        state = load_checkpoint(run / party / "model.npz", run_id="bag", party=party)
        assert state["networks"] == 2 and len(state["bag"]) == 1 and state["bag"][0]["seed"] == 1000
        own = {party, "top"} if party == "bank" else {party}
        assert set(state["segments"]) == set(state["bag"][0]["segments"]) == own
        assert not list((run / party / "checkpoints").glob("*.npz"))  # a bag keeps no epoch checkpoints

    inputs = {p: ["--input", str(tmp_path / p / "data" / "test.parquet")] for p in configs}
    _launch(tmp_path, configs, ["predict", "--job", "bag"], "predict", inputs)
    predictions = pd.read_csv(run / "bank" / "predictions" / "bag" / "predictions.csv", dtype={"customer_id": str})
    scored = predictions[predictions["status"] == "scored"].set_index("customer_id")["probability"]
    assert len(scored) > 300

    bag = _split_bag(tmp_path, networks=2)
    test = _views(tmp_path, "test")
    with pytest.warns(UserWarning, match="unknown to a partner"):
        expected = pd.Series(bag.predict_proba(test)[:, 1], index=test["bank"]["customer_id"].astype(str))
    with pytest.warns(UserWarning, match="unknown to a partner"):
        first = pd.Series(bag.estimators_[0].predict_proba(test)[:, 1], index=expected.index)
    np.testing.assert_allclose(scored.to_numpy(), expected[scored.index].to_numpy(), atol=1e-5)
    # and the bag is not its first network: the mean really averaged two different networks
    assert np.abs(scored.to_numpy() - first[scored.index].to_numpy()).max() > 1e-3

    report = (run / "bank" / "result.json").read_text()
    assert '"seed": 1000' in report  # result.json lists each network's seed, chosen epoch and epochs run
