"""Scoring with a trained horizontal split: each bank's customers through its segments and the server's.

The process test trains three banks and a server in one process, then runs ``vsplit predict`` for the server (serving
bank_1 and bank_2) and those two banks as OS processes over mutual TLS, and compares every score with the same
segments put together in one place. The machine tests check what the server refuses and the bank's window.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests._pilot_support import start, wait_all
from vsplit.config import load_config, resolve
from vsplit.errors import ConfigError, ProtocolError
from vsplit.horizontal.predict import ForwardRequest, ScoreClient, ScoreServer, ScoringDone
from vsplit.node import PartyNode
from vsplit.node.horizontal import run_in_process
from vsplit.pilot.horizontal import prepare_horizontal
from vsplit.pilot.splitfed import score_bank
from vsplit.runtime.checkpoint import load_checkpoint


def test_the_server_refuses_a_request_out_of_order_of_another_width_or_a_wrong_count() -> None:
    server = ScoreServer(lambda x: x[:, :1], width=3)
    with pytest.raises(ProtocolError, match="not expected"):
        server.receive("bank", ForwardRequest(batch=1, values=np.ones((2, 3), np.float32)))
    with pytest.raises(ProtocolError, match="2 values per row"):
        server.receive("bank", ForwardRequest(batch=0, values=np.ones((2, 2), np.float32)))
    server.receive("bank", ForwardRequest(batch=0, values=np.ones((2, 3), np.float32)))
    with pytest.raises(ProtocolError, match="says 2 batches"):
        server.receive("bank", ScoringDone(batches=2))
    with pytest.raises(ProtocolError, match="finite"):
        ForwardRequest(batch=0, values=np.full((1, 3), np.nan, np.float32))


def test_a_bank_keeps_at_most_its_window_of_requests_in_flight() -> None:
    client = ScoreClient("server", [np.ones((1, 2), np.float32)] * 5, window=2)
    assert [o.message.batch for o in client.start()] == [0, 1]
    server = ScoreServer(lambda x: x, width=2)
    reply = server.receive("bank", ForwardRequest(batch=0, values=np.ones((1, 2), np.float32)))[0].message
    assert [o.message.batch for o in client.receive("server", reply)] == [2]  # one answered, one more sent
    with pytest.raises(ProtocolError, match="not expected"):
        client.receive("server", reply)  # batch 0 again


def _train(root: Path, **kwargs) -> dict[str, Path]:
    configs = prepare_horizontal(root, banks=3, run_id="score", rows=200, train={"epochs": 2, "batch_size": 50},
                                 **kwargs)
    run_in_process([PartyNode(load_config(p)) for p in configs.values()])
    return configs


def _expected(configs: dict[str, Path], bank: str) -> tuple[pd.Series, np.ndarray]:
    """The same segments put together in one place (what the pilot's report scores)."""
    loaded = {p: load_config(c) for p, c in configs.items()}
    segments: dict = {}
    for party in (bank, "server"):
        path = PartyNode(loaded[party], progress=False).folder / "model.npz"
        if path.exists():  # in FedAvg the server owns no segment
            segments.update(load_checkpoint(path, run_id="score", party=party)["segments"])
    node, test, _, proba = score_bank(loaded[bank], loaded["server"], segments)
    return test[node.config.data.id_column].astype(str), proba


@pytest.mark.parametrize("segments", ["vanilla", "u_shaped"])
def test_banks_score_their_customers_with_the_server_as_processes_over_mutual_tls(tmp_path: Path,
                                                                                segments: str) -> None:
    # U-shaped: the server answers with the middle's output and each bank runs its head: it alone sees the scores
    configs = _train(tmp_path, schedule={"kind": "splitfed_v1"}, segments=segments)
    logs = {p: tmp_path / f"{p}.predict.log" for p in ("server", "bank_1", "bank_2")}
    tests = {b: load_config(configs[b]) for b in ("bank_1", "bank_2")}
    procs = {"server": start(["predict", "--config", str(configs["server"]), "--banks", "bank_1,bank_2", "--quiet",
                              "--job", "day1"], log=logs["server"])}
    for bank, config in tests.items():
        test_path = resolve(config, config.data.test_path)
        procs[bank] = start(["predict", "--config", str(configs[bank]), "--input", str(test_path), "--quiet",
                             "--job", "day1"], log=logs[bank])
    wait_all(procs, logs, timeout=120)
    for bank in tests:
        node = PartyNode(tests[bank], progress=False)
        got = pd.read_csv(node.folder / "predictions" / "day1" / "predictions.csv",
                          dtype={node.config.data.id_column: str})
        ids, want = _expected(configs, bank)
        assert (got["status"] == "scored").all() and list(got[node.config.data.id_column]) == list(ids)
        assert np.allclose(got["probability"].to_numpy(), want, atol=1e-6), bank
    served = PartyNode(load_config(configs["server"]), progress=False)
    summary = (served.folder / "predictions" / "day1" / "predict.json").read_text()
    assert '"bank_1"' in summary and '"bank_3"' not in summary


def test_fedavg_banks_score_alone_and_sequential_scores_only_at_the_final_holder(tmp_path: Path) -> None:
    configs = _train(tmp_path / "fedavg", schedule={"kind": "fedavg", "secure_aggregation": "off"})
    config = load_config(configs["bank_2"])
    path = PartyNode(config, progress=False).predict(resolve(config, config.data.test_path))  # no server needed
    got = pd.read_csv(path)
    _, want = _expected(configs, "bank_2")
    assert np.allclose(got["probability"].to_numpy(), want, atol=1e-6)
    # a party refused before scoring tells its peers, waiting for them up to network.connect_timeout_s: none runs here
    with pytest.raises(ConfigError, match="scores alone"):
        PartyNode(_no_peer_wait(configs["server"]), progress=False).predict(None)
    seq = _train(tmp_path / "seq", schedule={"kind": "sequential", "route": "direct"})
    with pytest.raises(ConfigError, match="final client segment is bank_3's"):
        PartyNode(_no_peer_wait(seq["bank_1"]), progress=False).predict(Path("unused"))


def _no_peer_wait(path: Path):
    """The party's config, waiting at most a second for a peer to connect."""
    config = load_config(path)
    return dataclasses.replace(config, network=dataclasses.replace(config.network, connect_timeout_s=1.0))


class _Tapped:
    """A channel that records every frame sent through it."""

    def __init__(self, inner, frames: list) -> None:
        self.inner, self.frames = inner, frames

    def send(self, frame) -> None:
        self.frames.append(bytes(frame))
        self.inner.send(frame)

    def recv(self, timeout):
        return self.inner.recv(timeout)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("segments", ["vanilla", "u_shaped"])
def test_what_crosses_in_scoring_no_raw_value_id_weight_or_u_shaped_score(tmp_path: Path, segments: str) -> None:
    """Tapped frames: the bank sends no raw value or ID; the server sends none of its weights; U-shaped: no score
    crosses at all (the bank's head runs at the bank)."""
    import threading

    from tests._leaks import leaks
    from vsplit.transport.codec import decode
    from vsplit.transport.memory import memory_pair

    configs = _train(tmp_path, schedule={"kind": "splitfed_v1"}, segments=segments)
    bank = PartyNode(load_config(configs["bank_1"]), progress=False)
    server = PartyNode(load_config(configs["server"]), progress=False)
    sent: dict[str, list[bytes]] = {"bank_1": [], "server": []}
    at_bank, at_server = memory_pair()
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            server.predict(None, peers=["bank_1"], channels={"bank_1": _Tapped(at_server, sent["server"])})
        except BaseException as exc:  # surfaced below
            failure.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    test_path = resolve(bank.config, bank.config.data.test_path)
    path = bank.predict(test_path, channels={"server": _Tapped(at_bank, sent["bank_1"])})
    thread.join(60)
    assert not failure and sent["bank_1"] and sent["server"]
    table = pd.read_parquet(test_path)
    raw = table["LIMIT_BAL"].to_numpy()[:40]  # credit limits: distinctive raw values
    ids = [str(i).encode() for i in table[bank.config.data.id_column][:: max(1, len(table) // 100)]]
    assert bank.party is not None
    prepared = bank.party.prepare(table)[1][-1].numpy()  # the numeric inputs, after this bank's preprocessing
    column = prepared[:, int(np.argmax([len(np.unique(c)) for c in prepared.T]))]
    model_inputs = [v for v in np.unique(column) if v not in (0.0, 1.0)][:40]
    for frame in sent["bank_1"]:
        msg = decode(frame)[1]
        assert not leaks(msg, frame, raw), "the bank sent a raw value"
        assert not leaks(msg, frame, model_inputs), "the bank sent its model inputs"
        assert not any(i in frame for i in ids), "the bank sent a customer ID"
    weights = [t.detach().numpy().astype(np.float32).tobytes()[:16]
               for m in server.modules.values() for t in m.parameters() if t.numel() >= 4]
    for frame in sent["server"]:
        assert not any(w in frame for w in weights), "the server sent its weights"
    if segments == "u_shaped":  # the scores never cross: none of them is in any frame
        scores = pd.read_csv(path)["probability"].to_numpy()[:20]
        for frame in sent["server"] + sent["bank_1"]:
            assert not leaks(decode(frame)[1], frame, scores), "a score crossed"
