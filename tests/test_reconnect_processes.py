"""Two party processes train over mutual TLS through the link emulator; the connection is reset in the middle of
epoch 2 and neither process restarts: the saved models equal an uninterrupted run's bit for bit. And the party
runtime's switch: ``network.reconnect_timeout_s = 0`` opens plain TLS channels, anything above resumable ones."""

from __future__ import annotations

import math
import re
import threading
import time

import pandas as pd
import pytest
import torch
from _pilot_support import free_port, start, wait_all, write_configs
from _transport_support import LinkEmulator

from vsplit.config import load_config
from vsplit.datasets import preset
from vsplit.errors import ConfigError
from vsplit.estimator import SplitClassifier
from vsplit.node import PartyNode
from vsplit.pilot.prepare import prepare_preset
from vsplit.runtime.checkpoint import load_checkpoint
from vsplit.transport.resume import ResumableChannel
from vsplit.transport.tls import TlsChannel

EPOCHS, BATCH, WIDTH = 2, 64, 16
SETTINGS = f"[train]\nepochs = {EPOCHS}\nbatch_size = {BATCH}\npatience = 10\n"
RUN = "sturdy"


@pytest.fixture(scope="module")
def secretflow_bank():
    return preset("secretflow_bank", seed=0)


def half_an_epoch_of_embeddings(root) -> int:
    """Bytes of embeddings the partner sends in half a training epoch (a lower bound of its traffic then)."""
    ids = [set(pd.read_parquet(root / p / "data" / "train.parquet")["customer_id"]) for p in ("bank", "partner")]
    steps = math.ceil(len(ids[0] & ids[1]) * 0.9 / BATCH)  # validation_fraction 0.1
    return steps // 2 * BATCH * WIDTH * 4


def test_reset_in_epoch_two_is_survived_without_restarts_and_the_models_equal_an_uninterrupted_run(
        tmp_path, secretflow_bank):
    prepare_preset(secretflow_bank, tmp_path)
    port = free_port()
    configs = write_configs(tmp_path, port=port, run_id=RUN, extra=SETTINGS)
    common = ["--quiet", "--set", "output.baselines=false", "--set", 'data.test_path=""']
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    runs = tmp_path / "runs" / RUN
    with LinkEmulator(target=("127.0.0.1", port), delay_s=0.001) as link:  # 2 ms round trip
        procs = {
            "bank": start(["train", "--config", str(configs["bank"]), *common], log=logs["bank"]),
            "partner": start(["train", "--config", str(configs["partner"]), *common, "--set",
                              f"network.dial=127.0.0.1:{link.address[1]}"], log=logs["partner"]),
        }
        first = runs / "partner" / "checkpoints" / "epoch-0000.npz"
        deadline = time.monotonic() + 90
        while not first.exists():  # the end of epoch 1: arm a reset half an epoch of embeddings later
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs.values()), \
                {p: logs[p].read_text()[-1500:] for p in procs}
            time.sleep(0.005)
        epoch_one_ended = time.time()
        link.reset_at("up", link.passed["up"] + half_an_epoch_of_embeddings(tmp_path))
        wait_all(procs, logs, timeout=120)  # each process started once and exits 0
    (reset,) = link.resets_done
    reset_wall = time.time() - (time.monotonic() - reset.at)
    epoch_two_ended = (runs / "partner" / "checkpoints" / "epoch-0001.npz").stat().st_mtime
    assert epoch_one_ended < reset_wall < epoch_two_ended, "the reset did not fall inside epoch 2"
    assert link.connections == 2
    restored = {p: re.findall(r"restored after ([0-9.]+) s", (runs / p / "log.txt").read_text()) for p in configs}
    assert restored["partner"] and restored["bank"], restored  # both saw the drop and the new link
    print(f"reconnect pause logged through a 2 ms RTT link: {restored}")

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the party processes (train.threads = 1): the same float reductions
    try:
        clf = SplitClassifier(label_party="bank", label="y", positive_label="yes", epochs=EPOCHS, batch_size=BATCH,
                              patience=10, random_state=0, candidates="network").fit(secretflow_bank.train)
    finally:
        torch.set_num_threads(threads)
    bank = load_checkpoint(runs / "bank" / "model.npz", run_id=RUN, party="bank")
    partner = load_checkpoint(runs / "partner" / "model.npz", run_id=RUN, party="partner")
    expected = {
        ("bank", "bank"): clf.label_party_.model.state_dict(),
        ("bank", "top"): clf.label_party_.top.state_dict(),
        ("partner", "partner"): clf.feature_parties_["partner"].model.state_dict(),
    }
    saved = {"bank": bank, "partner": partner}
    for (party, segment), want in expected.items():
        got = saved[party]["segments"][segment]
        assert got.keys() == want.keys()
        for key in want:
            assert torch.equal(got[key], want[key]), f"{party}/{segment}/{key} differs from the uninterrupted run"


def _nodes(tmp_path, secretflow_bank, *overrides: str) -> dict[str, PartyNode]:
    prepare_preset(secretflow_bank, tmp_path)
    configs = write_configs(tmp_path, port=free_port(), run_id="switch")
    return {p: PartyNode(load_config(c, overrides=list(overrides)), progress=False) for p, c in configs.items()}


@pytest.mark.parametrize(("timeout", "kind"), [("0", TlsChannel), ("5", ResumableChannel)])
def test_reconnect_timeout_zero_opens_plain_tls_channels_and_above_zero_resumable_ones(
        tmp_path, secretflow_bank, timeout, kind):
    nodes = _nodes(tmp_path, secretflow_bank, f"network.reconnect_timeout_s={timeout}")
    opened: dict[str, dict] = {}
    threads = [threading.Thread(target=lambda p=p: opened.update({p: nodes[p].open_channels()})) for p in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    (to_partner,), (to_bank,) = opened["bank"].values(), opened["partner"].values()
    assert type(to_partner) is kind and type(to_bank) is kind
    to_bank.send(b"ping")
    assert bytes(to_partner.recv(timeout=5)) == b"ping"
    for channel in (to_bank, to_partner):
        channel.close()


def test_a_negative_reconnect_timeout_is_refused_naming_the_key(tmp_path):
    configs = write_configs(tmp_path, port=7700, run_id="bad")
    with pytest.raises(ConfigError, match=r"network\.reconnect_timeout_s: must be 0 \(no reconnects\) or positive"):
        load_config(configs["bank"], overrides=["network.reconnect_timeout_s=-1"], check_files=False)
