"""The join of a horizontal run between processes, its config checks, and the signed hand-off keys."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from vsplit.config import load_config
from vsplit.config.horizontal import settings_of
from vsplit.errors import AuthenticationError, ConfigError, ProtocolError
from vsplit.horizontal.join import Join, JoinFederated, JoinServer, Roster
from vsplit.horizontal.keysig import sign_key
from vsplit.node.horizontal import HorizontalNode, run_in_process
from vsplit.pilot.horizontal import prepare_horizontal
from vsplit.protocol.abort import AbortCode


def _join(rows: int, schema: str = "s", resume: int = -1) -> Join:
    return Join(rows=rows, schema=schema, resume_round=resume, public=bytes(32).hex(),
                labels=np.zeros(0, np.float32), signature=np.ones(70, np.uint8))


def test_server_refuses_clients_with_other_segments() -> None:
    server = JoinServer(("a", "b", "c"), own_round=-1)
    server.receive("a", _join(3))
    server.receive("b", _join(4, schema="other"))
    with pytest.raises(ProtocolError, match="b built other segments than a") as info:
        server.receive("c", _join(5))
    assert info.value.code == AbortCode.CONFIG_MISMATCH


@pytest.mark.parametrize(("rounds", "own", "start"), [((-1, 3, 3), 3, 0), ((2, 3, 4), 5, 3), ((4, 4, 4), 2, 3)])
def test_the_run_starts_after_the_last_round_every_party_finished(rounds, own, start) -> None:
    server = JoinServer(("a", "b", "c"), own_round=own)
    out = [server.receive(c, _join(2, resume=r)) for c, r in zip("abc", rounds, strict=True)][-1]
    assert {o.message.start_round for o in out} == {start}


def test_federated_server_refuses_rosters_that_differ() -> None:
    server = JoinServer(("a", "b"), own_round=-1)
    server.receive("a", _join(3))
    roster = server.receive("b", _join(4))[0].message
    fed = JoinFederated(("a", "b"))
    fed.receive("a", roster)
    with pytest.raises(ProtocolError, match="different rosters"):
        fed.receive("b", dataclasses.replace(roster, rows=np.array([3, 5], np.int64)))


def test_config_refusals(tmp_path: Path) -> None:
    configs = prepare_horizontal(tmp_path, banks=3, port=7990, run_id="c", rows=40,
                                 schedule={"kind": "sequential", "route": "server"})
    load_config(configs["bank_1"])  # valid as written
    with pytest.raises(ConfigError, match=r"network\.client_certs"):
        load_config(configs["bank_1"], overrides=["network.client_certs={}"])
    with pytest.raises(ConfigError, match="neither a client"):
        load_config(configs["bank_1"], overrides=["party.name=bank_9"])
    with pytest.raises(ConfigError, match="federated_server"):
        load_config(configs["server"], overrides=["schedule.kind=fedavg", "schedule.federated_server=fed"])
    with pytest.raises(ConfigError, match=r"network\.peers"):
        load_config(configs["server"], overrides=['network.peers={bank_1 = "keys/peers/bank_1.pem"}'])
    splitfed = prepare_horizontal(tmp_path / "sf", banks=3, port=7989, run_id="c2", rows=40)  # secure aggregation
    load_config(splitfed["bank_1"])
    with pytest.raises(ConfigError, match=r"network\.client_certs: secure aggregation masks with the other"):
        load_config(splitfed["bank_1"], overrides=["network.client_certs={}"])
    load_config(splitfed["bank_1"], overrides=["network.client_certs={}", "schedule.secure_aggregation=off"])
    with pytest.raises(ConfigError, match=r"schedule\.lr_schedule: must be one of constant, step, cosine"):
        load_config(splitfed["bank_1"], overrides=['schedule.lr_schedule="linear"'])
    with pytest.raises(ConfigError, match="lr_step_at must be in"):
        load_config(splitfed["bank_1"], overrides=["schedule.lr_step_at=1.5"])
    settings = settings_of(load_config(splitfed["bank_1"], overrides=['schedule.lr_schedule="step"']))
    assert (settings.lr_schedule, settings.lr_step_at, settings.lr_factor) == ("step", 0.9, 0.1)


def test_a_relayed_key_the_server_swapped_is_refused(tmp_path: Path) -> None:
    configs = prepare_horizontal(tmp_path, banks=3, port=7991, run_id="swap", rows=40,
                                 schedule={"kind": "sequential", "route": "server"})
    nodes = {p: HorizontalNode(load_config(c)) for p, c in configs.items()}
    run_in_process(nodes.values())  # honest: every key checks out
    bank = nodes["bank_1"]
    keys = {c: bytes([i + 1]) * 32 for i, c in enumerate(("bank_1", "bank_2", "bank_3"))}
    sigs = {c: nodes[c].sign(k) for c, k in keys.items()}

    def roster(signatures: dict[str, bytes]) -> Roster:
        order = list(keys)
        return Roster(names="\n".join(order), rows=np.ones(3, np.int64), publics="".join(keys[c].hex() for c in order),
                      start_round=0, signatures=np.frombuffer(b"".join(signatures[c] for c in order), np.uint8),
                      signature_sizes=np.array([len(signatures[c]) for c in order], np.int64))

    bank.check_keys(roster(sigs))
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    server_key = load_pem_private_key((tmp_path / "server" / "keys" / "server.key").read_bytes(), password=None)
    forged = {**sigs, "bank_2": sign_key(server_key, run_id="swap", client="bank_2", public=keys["bank_2"])}
    with pytest.raises(AuthenticationError, match="bank_2"):
        bank.check_keys(roster(forged))
    with pytest.raises(AuthenticationError, match="bank_3"):  # a key moved from one client to another
        bank.check_keys(roster({**sigs, "bank_3": sigs["bank_2"]}))


def test_no_frame_to_a_bank_holds_another_banks_rows_or_labels(tmp_path: Path) -> None:
    configs = prepare_horizontal(tmp_path, banks=3, port=7993, run_id="tap", rows=60,
                                 schedule={"kind": "sequential", "route": "server"}, train={"epochs": 1})
    nodes = {p: HorizontalNode(load_config(c)) for p, c in configs.items()}
    frames: list[tuple[str, str, bytes]] = []
    run_in_process(nodes.values(), taps=[lambda s, r, m, f: frames.append((s, r, bytes(f)))])
    banks = [p for p in nodes if p.startswith("bank")]
    for bank in banks:
        to_bank = b"".join(f for _, r, f in frames if r == bank)
        assert to_bank
        for other in banks:
            if other == bank:
                continue
            party = nodes[other].party
            numeric = party.inputs[1].numpy()
            for row in numeric[:20]:  # each of the other bank's preprocessed rows
                assert row.tobytes() not in to_bank
            assert party.labels.numpy().astype("float32").tobytes() not in to_bank
    # the labels do reach the server: that is what a vanilla split sends it
    to_server = b"".join(f for _, r, f in frames if r == "server")
    assert nodes["bank_2"].party.labels.numpy().astype("float32").tobytes() in to_server
