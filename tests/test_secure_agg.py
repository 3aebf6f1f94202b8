"""Secure aggregation: the sum is exact, single masked updates say nothing, dropouts redo, frames are checked."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from vsplit.errors import ConfigError, ProtocolError
from vsplit.federated.masking import MaskContext, new_private_key, pair_seed, public_key
from vsplit.federated.quantize import FixedPoint
from vsplit.federated.secagg_messages import (
    AggregateResult,
    MaskedInput,
    PublicKey,
    Roster,
    decode_frame,
    encode_frame,
)
from vsplit.federated.secure_agg import (
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    plain_aggregate,
    run_in_memory,
)
from vsplit.protocol.machine import Outgoing

SESSION = b"secure-agg-tests"
LENGTH = 3000


def updates_for(names, *, length=LENGTH, seed=0):
    rng = np.random.default_rng(seed)
    values = {n: rng.normal(0.0, 0.5, size=length) + 0.1 * i for i, n in enumerate(names)}
    weights = {n: int(w) for n, w in zip(names, rng.integers(500, 9000, size=len(names)), strict=True)}
    return values, weights


def machines(names, *, length=LENGTH, seed=0, **config):
    config = SecAggConfig(run_id="run-7", round=2, clients=tuple(names), length=length, **config)
    values, weights = updates_for(names, length=length, seed=seed)
    clients = {
        n: SecAggClient(n, config, values=values[n], weight=weights[n],
                        private_key=new_private_key(seed=bytes([seed, i + 1]) * 16))
        for i, n in enumerate(names)
    }
    return config, SecAggServer(config), clients, values, weights


class WireTap:
    """Runs an aggregation over encoded frames, decoding each with the size checks, and keeps every frame."""

    def __init__(self, server, clients):
        self.server, self.clients = server, clients
        self.frames: list[tuple[str, str, bytes]] = []
        self.seq = 0

    def carry(self, sender: str, out: Outgoing):
        config = self.server.config
        frame = bytes(encode_frame(out.message, session=SESSION, seq=self.seq))
        self.seq += 1
        self.frames.append((sender, out.to, frame))
        return decode_frame(frame, length=config.length, clients=len(config.clients))

    def run(self, *, drop_before_input=()):
        name = self.server.config.server
        queue = [(n, out) for n, c in self.clients.items() for out in c.start()]
        gone = set()
        while queue:
            sender, out = queue.pop(0)
            msg = self.carry(sender, out)
            if out.to == name:
                if isinstance(msg, MaskedInput) and sender in drop_before_input and sender not in gone:
                    gone.add(sender)
                    queue += [(name, reply) for reply in self.server.drop(sender)]
                    continue
                queue += [(name, reply) for reply in self.server.receive(sender, msg)]
            elif out.to not in gone:
                queue += [(out.to, reply) for reply in self.clients[out.to].receive(sender, msg)]
        return self.server.result

    def masked_inputs(self, attempt=None):
        config = self.server.config
        found = {}
        for sender, to, frame in self.frames:
            msg = decode_frame(frame, length=config.length, clients=len(config.clients))
            if to == config.server and isinstance(msg, MaskedInput) and attempt in (None, msg.attempt):
                found[(sender, msg.attempt)] = msg.values
        return found


def test_the_server_gets_exactly_the_plain_weighted_sum():
    names = ["bank_1", "bank_2", "bank_3", "bank_4"]
    config, server, clients, values, weights = machines(names)
    result = WireTap(server, clients).run()
    plain = plain_aggregate([values[n] for n in names], [weights[n] for n in names], config.fixed_point)
    assert np.array_equal(result.quantized_sum, plain.quantized_sum)  # integers, exactly
    assert np.array_equal(result.mean, plain.mean)  # the same floats, bit for bit
    assert result.total_weight == sum(weights.values()) and result.members == tuple(names)
    exact = sum(weights[n] * values[n] for n in names) / sum(weights.values())
    assert np.abs(result.mean - exact).max() < 1e-6  # quantization error: about 2^-21 / rows
    for client in clients.values():  # every client gets the mean, nothing else
        assert client.done and np.array_equal(client.result.mean, result.mean)


def test_no_masked_update_equals_or_correlates_with_the_clients_true_update():
    names = ["bank_1", "bank_2", "bank_3"]
    config, server, clients, values, weights = machines(names, seed=3)
    tap = WireTap(server, clients)
    tap.run()
    sent = tap.masked_inputs()
    assert len(sent) == 3
    for (name, _), masked in sent.items():
        true_quantized = config.fixed_point.encode(values[name], weight=weights[name]).view(np.int64)
        assert np.mean(masked == true_quantized) < 0.001
        r = np.corrcoef(masked[:-1].astype(np.float64), values[name])[0, 1]
        assert abs(r) < 0.05, (name, r)
        r_quantized = np.corrcoef(masked[:-1].astype(np.float64), true_quantized[:-1].astype(np.float64))[0, 1]
        assert abs(r_quantized) < 0.05, (name, r_quantized)
        assert masked[-1] != weights[name]  # the row count is masked too


def test_a_client_that_drops_before_sending_makes_the_survivors_redo_with_fresh_masks():
    names = ["bank_1", "bank_2", "bank_3", "bank_4"]
    config, server, clients, values, weights = machines(names, seed=5)
    tap = WireTap(server, clients)
    result = tap.run(drop_before_input=["bank_3"])
    survivors = ["bank_1", "bank_2", "bank_4"]
    plain = plain_aggregate([values[n] for n in survivors], [weights[n] for n in survivors], config.fixed_point)
    assert result.attempt == 1 and result.members == tuple(survivors)
    assert np.array_equal(result.quantized_sum, plain.quantized_sum)
    assert np.array_equal(result.mean, plain.mean)
    first, second = tap.masked_inputs(attempt=0), tap.masked_inputs(attempt=1)
    assert ("bank_1", 0) in first and ("bank_1", 1) in second
    assert np.mean(first["bank_1", 0] == second["bank_1", 1]) < 0.001  # re-masked, not re-sent
    assert not clients["bank_3"].done and clients["bank_4"].done


def test_too_many_dropouts_stop_the_aggregation():
    names = ["a", "b", "c"]
    _, server, clients, _, _ = machines(names, length=10)
    with pytest.raises(ProtocolError, match="below the 3 required"):
        run_in_memory(server, clients, drop_before_input=["b"])


def test_a_drop_while_keys_are_collected_needs_no_redo():
    names = ["a", "b", "c", "d"]
    config, server, clients, values, weights = machines(names, length=20)
    for n in ("a", "b", "c"):
        assert server.receive(n, clients[n].start()[0].message) == []
    rosters = server.drop("d")
    assert {out.to for out in rosters} == {"a", "b", "c"} and rosters[0].message.attempt == 0
    inputs = [out for out in rosters for out in clients[out.to].receive("federated", out.message)]
    replies = [reply for out, n in zip(inputs, "abc", strict=True) for reply in server.receive(n, out.message)]
    assert len(replies) == 3 and server.result.members == ("a", "b", "c")
    plain = plain_aggregate([values[n] for n in "abc"], [weights[n] for n in "abc"], config.fixed_point)
    assert np.array_equal(server.result.quantized_sum, plain.quantized_sum)


def test_fewer_than_three_clients_are_refused_unless_explicitly_allowed():
    with pytest.raises(ConfigError, match="at least 3 clients"):
        SecAggConfig(run_id="r", round=0, clients=("a", "b"), length=4)
    with pytest.raises(ConfigError, match="allow_fewer=True"):
        SecAggConfig(run_id="r", round=0, clients=("a", "b"), length=4, min_clients=2)
    _, server, clients, values, weights = machines(["a", "b"], length=4, min_clients=2, allow_fewer=True)
    result = run_in_memory(server, clients)
    expected = (weights["a"] * values["a"] + weights["b"] * values["b"]) / (weights["a"] + weights["b"])
    assert np.abs(result.mean - expected).max() < 1e-6


def roster_for(clients, members, *, attempt=0, swap_key=False):
    keys = np.stack([np.frombuffer(clients[m].public, np.uint8) for m in members])
    if swap_key:
        keys[0] = np.frombuffer(public_key(new_private_key(seed=b"z" * 32)), np.uint8)
    indices = np.array([list(clients).index(m) for m in members], np.int64)
    return Roster(round=2, attempt=attempt, members=indices, keys=keys)


@pytest.mark.parametrize(
    ("members", "swap_key", "words"),
    [
        (["a", "b"], False, "below the 3"),  # a server trying to isolate a client
        (["b", "c", "d"], False, "leaves this client out"),
        (["a", "b", "c"], True, "changes this client's own"),
    ],
)
def test_a_client_refuses_a_roster_that_would_expose_it(members, swap_key, words):
    _, _, clients, _, _ = machines(["a", "b", "c", "d"], length=8)
    with pytest.raises(ProtocolError, match=words):
        clients["a"].receive("federated", roster_for(clients, members, swap_key=swap_key))


def test_a_client_refuses_a_redo_that_adds_members_or_goes_back():
    _, _, clients, _, _ = machines(["a", "b", "c", "d"], length=8)
    clients["a"].receive("federated", roster_for(clients, ["a", "b", "c"]))
    with pytest.raises(ProtocolError, match="adds clients"):
        clients["a"].receive("federated", roster_for(clients, ["a", "b", "d"], attempt=1))
    with pytest.raises(ProtocolError, match="expected round 2 after attempt 0"):
        clients["a"].receive("federated", roster_for(clients, ["a", "b", "c"], attempt=0))
    with pytest.raises(ProtocolError, match="not the server"):
        clients["a"].receive("b", roster_for(clients, ["a", "b", "c"], attempt=1))


def test_decode_refuses_truncated_oversized_and_foreign_frames():
    masked = MaskedInput(round=0, attempt=0, values=np.arange(11, dtype=np.int64))
    frame = bytes(encode_frame(masked, session=SESSION, seq=0))
    assert np.array_equal(decode_frame(frame, length=10, clients=3).values, masked.values)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_frame(frame[:cut], length=10, clients=3)
    with pytest.raises(ProtocolError, match="over the"):
        decode_frame(frame + b"\x00" * 8, length=10, clients=3)
    with pytest.raises(ProtocolError, match="not 12"):  # fits the limit, but one word short of the agreed length
        decode_frame(frame, length=11, clients=3)
    with pytest.raises(ProtocolError, match="trailing"):
        decode_frame(frame + b"\x00", length=11, clients=3)
    result = AggregateResult(round=0, attempt=0, total_weight=3, values=np.zeros(10))
    with pytest.raises(ProtocolError, match="over the"):
        decode_frame(bytes(encode_frame(result, session=SESSION, seq=1)), length=2, clients=3)
    from vsplit.protocol.training.messages import TrainingPlan

    plan = TrainingPlan(epochs=1, batch_size=1, seed=0, eval_chunk=1, start_epoch=0, predict=False, then_score=False,
                        roles=np.zeros(1, np.uint8))
    with pytest.raises(ProtocolError, match="not a secure aggregation message"):
        decode_frame(bytes(encode_frame(plan, session=SESSION, seq=2)), length=10, clients=3)
    with pytest.raises(ProtocolError, match="key"):
        PublicKey(round=0, key=np.zeros(31, np.uint8))


def test_masks_are_bound_to_the_run_the_round_and_the_attempt():
    a, b = new_private_key(seed=b"a" * 32), new_private_key(seed=b"b" * 32)

    def seed(**context):
        ctx = MaskContext(**{"run_id": "r", "round": 0, "attempt": 0, **context})
        return pair_seed(a, public_key(b), own_index=0, peer_index=1, own_public=public_key(a), context=ctx)

    seeds = {seed(), seed(run_id="s"), seed(round=1), seed(attempt=1)}
    assert len(seeds) == 4


def test_the_fixed_point_refuses_what_could_overflow():
    fp = FixedPoint()
    assert fp.capacity() >= 1024
    with pytest.raises(ConfigError, match="could overflow"):
        FixedPoint(bits=32, frac_bits=8, bound=100.0, max_weight=10_000).check_capacity(9)
    FixedPoint(bits=32, frac_bits=8, bound=100.0, max_weight=10_000).check_capacity(8)  # 8 * 2.56e8 < 2^31
    with pytest.raises(ConfigError, match="above the agreed bound"):
        fp.encode(np.array([2000.0]), weight=1)
    with pytest.raises(ConfigError, match="NaN"):
        fp.encode(np.array([np.nan]), weight=1)
    with pytest.raises(ConfigError, match="not below 2\\^53"):
        FixedPoint(frac_bits=40)


def test_a_narrow_modulus_still_sums_exactly():
    fp = FixedPoint(bits=32, frac_bits=8, bound=4.0, max_weight=1000)
    names = ["a", "b", "c", "d", "e"]
    config = SecAggConfig(run_id="r", round=0, clients=tuple(names), length=200, fixed_point=fp)
    values, weights = updates_for(names, length=200)
    values = {n: np.clip(v, -4, 4) for n, v in values.items()}  # inside this narrow format's bounds
    weights = {n: w % 1000 + 1 for n, w in weights.items()}
    clients = {n: SecAggClient(n, config, values=values[n], weight=weights[n]) for n in names}
    result = run_in_memory(SecAggServer(config), clients)
    plain = plain_aggregate([values[n] for n in names], [weights[n] for n in names], fp)
    assert np.array_equal(result.quantized_sum, plain.quantized_sum) and np.array_equal(result.mean, plain.mean)


@settings(max_examples=15, deadline=None)
@given(st.integers(3, 6), st.integers(1, 40), st.integers(0, 2**32 - 1), st.data())
def test_any_members_and_any_dropout_give_the_survivors_plain_sum(n, length, seed, data):
    names = [f"c{i}" for i in range(n)]
    config, server, clients, values, weights = machines(names, length=length, seed=seed % 250)
    dropped = data.draw(st.lists(st.sampled_from(names), max_size=n - 3, unique=True))
    result = run_in_memory(server, clients, drop_before_input=dropped)
    survivors = [m for m in names if m not in dropped]
    plain = plain_aggregate([values[m] for m in survivors], [weights[m] for m in survivors], config.fixed_point)
    assert result.members == tuple(survivors)
    assert np.array_equal(result.quantized_sum, plain.quantized_sum)


def test_a_client_with_the_signed_run_keys_refuses_a_roster_whose_relayed_key_was_swapped():
    config, server, clients, values, weights = machines(["a", "b", "c"], length=8)
    private = {n: new_private_key(seed=bytes([9, i + 1]) * 16) for i, n in enumerate(clients)}
    known = {n: public_key(k) for n, k in private.items()}
    trusting = {n: SecAggClient(n, config, values=values[n], weight=weights[n], private_key=private[n], known=known)
                for n in clients}
    names = list(clients)
    plain = plain_aggregate([values[n] for n in names], [weights[n] for n in names], config.fixed_point)
    assert WireTap(server, trusting).run().quantized_sum.tolist() == plain.quantized_sum.tolist()  # honest relay
    keys = np.stack([np.frombuffer(known[n], np.uint8) for n in ("a", "b", "c")])
    keys[1] = np.frombuffer(public_key(new_private_key(seed=b"m" * 32)), np.uint8)  # the server's own key for b
    fresh = SecAggClient("a", config, values=values["a"], weight=weights["a"], private_key=private["a"], known=known)
    with pytest.raises(ProtocolError, match="roster's key for 'b' is not the key 'b' signed at the join"):
        fresh.receive("federated", Roster(round=2, attempt=0, members=np.arange(3), keys=keys))
    with pytest.raises(ConfigError, match="does not match its known public key"):
        SecAggClient("a", config, values=values["a"], weight=weights["a"], private_key=private["b"], known=known)
