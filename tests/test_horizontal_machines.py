"""Horizontal schedules one piece at a time: the state message, loading, averaging, the hub, the aggregator, sealed
hand-offs, and the privacy boundary on tapped frames (what reaches the server and what reaches each client)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from _horizontal_support import BATCH, ROWS, data, horizontal, optimizer, run, segments

from vsplit.errors import ConfigError, ProtocolError
from vsplit.horizontal import Settings, compile_schedule, format_schedule
from vsplit.horizontal.averages import average
from vsplit.horizontal.machines import MAX_HELD, Aggregate, Hub, SharedStep
from vsplit.horizontal.messages import SealedState, SegmentState
from vsplit.horizontal.sealed import new_key, open_sealed, public_bytes, seal
from vsplit.horizontal.state import extract, load
from vsplit.protocol.training.messages import TRAIN, Activations
from vsplit.topology import Horizontal, Topology
from vsplit.transport import codec


def test_segment_state_round_trips_through_the_codec_with_every_dtype_and_rank():
    arrays = {"w/a": np.arange(6, dtype=np.float32).reshape(2, 3), "b/n": np.array(7, np.int64),
              "o/a/step": np.array(3.0, np.float32), "o/a/v": np.zeros((1, 2, 1, 1, 2), np.float64)}
    msg = SegmentState.pack(round=2, rows=5, arrays=arrays)
    _, back = codec.decode(codec.encode(msg, session=b"s" * 16, seq=0))
    got = back.arrays()
    assert list(got) == list(arrays)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and np.array_equal(got[k], v)


def test_segment_state_refuses_sizes_that_do_not_add_up_before_reading():
    msg = SegmentState.pack(round=0, rows=1, arrays={"w/a": np.ones((4, 4), np.float32)})
    with pytest.raises(ProtocolError, match="bytes"):
        dataclasses.replace(msg, data=msg.data[:-1])
    with pytest.raises(ProtocolError, match="dims"):
        dataclasses.replace(msg, ranks=np.array([3], np.uint8))
    with pytest.raises(ProtocolError, match="dtype code"):
        dataclasses.replace(msg, dtypes=np.array([9], np.uint8))
    nan = SegmentState.pack(round=0, rows=1, arrays={"w/a": np.array([np.nan], np.float32)})
    with pytest.raises(ProtocolError, match="non-finite"):
        nan.arrays()


def test_load_refuses_names_and_shapes_the_receiver_does_not_have():
    modules = {"bottom": torch.nn.Linear(3, 2)}
    opt = torch.optim.Adam(modules["bottom"].parameters())
    good = extract(modules, opt)
    with pytest.raises(ProtocolError, match="no parameter or buffer"):
        load(modules, opt, {**good, "w/bottom/extra": np.zeros(1, np.float32)})
    with pytest.raises(ProtocolError, match="this party's is"):
        load(modules, opt, {**good, "w/bottom/bias": np.zeros(3, np.float32)})
    with pytest.raises(ProtocolError, match="optimizer state"):
        load(modules, opt, {"o/bottom/bias/exp_avg": np.zeros(5, np.float32)})


def test_full_state_moves_adam_moments_and_steps_into_the_receivers_own_optimizer():
    torch.manual_seed(0)
    a, b = {"m": torch.nn.Linear(3, 1)}, {"m": torch.nn.Linear(3, 1)}
    opt_a, opt_b = torch.optim.Adam(a["m"].parameters(), lr=0.1), torch.optim.Adam(b["m"].parameters(), lr=0.1)
    a["m"](torch.randn(4, 3)).sum().backward()
    opt_a.step()
    load(b, opt_b, extract(a, opt_a, optimizer_state=True))
    x = torch.randn(4, 3)
    for m, opt in ((a, opt_a), (b, opt_b)):
        opt.zero_grad()
        m["m"](x).sum().backward()
        opt.step()
    assert all(torch.equal(p, q) for p, q in zip(a["m"].parameters(), b["m"].parameters(), strict=True))
    assert float(opt_b.state[b["m"].weight]["step"]) == 2.0


def test_average_weights_by_rows_and_refuses_different_states():
    one, two = {"w": np.array([0.0, 3.0], np.float32)}, {"w": np.array([3.0, 0.0], np.float32)}
    assert average([one, two], [1, 2])["w"].tolist() == [2.0, 1.0]
    with pytest.raises(ProtocolError):
        average([one, {"v": one["w"]}], [1, 1])


def test_aggregator_refuses_a_client_that_claims_other_rows_than_the_schedule():
    agg = Aggregate({"a": 10, "b": 5}, round=0, average=average)
    state = SegmentState.pack(round=0, rows=50, arrays={"w/x": np.zeros(1, np.float32)})
    with pytest.raises(ProtocolError, match="claims 50 rows"):
        agg.receive("a", state)
    with pytest.raises(ProtocolError):
        agg.receive("mallory", dataclasses.replace(state, rows=10))


def _activations(step: int) -> Activations:
    return Activations(cut=1, slot=0, phase=TRAIN, epoch=0, step=step, values=np.zeros((2, 4), np.float32))


class _Idle:
    done, result = False, None

    def start(self):
        return []

    def receive(self, sender, msg):
        raise AssertionError("held messages must not reach the machine before their turn")


def test_hub_holds_a_client_ahead_of_its_turn_and_refuses_one_that_floods():
    counter = SharedStep(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1))
    hub = Hub({"a": _Idle(), "b": _Idle()}, order=["a", "b"], counter=counter)
    for step in range(MAX_HELD):
        assert hub.receive("b", _activations(step)) == []
    with pytest.raises(ProtocolError, match="ahead of its turn"):
        hub.receive("b", _activations(MAX_HELD))
    with pytest.raises(ProtocolError, match="not a client"):
        hub.receive("mallory", _activations(0))


def test_schedules_validate_their_settings_and_print():
    with pytest.raises(ConfigError, match="order must be one of"):
        Settings(kind="sequential", order="shuffled")
    settings = Settings(kind="sequential", rounds=2, order="random_no_repeat", seed=4)
    stages = compile_schedule(settings, clients=("a", "b", "c"), server="s", rows=ROWS)
    text = format_schedule(stages, settings)
    trains = [s.clients[0] for s in stages if s.kind == "train"]
    assert sorted(trains[:3]) == sorted(trains[3:]) == ["a", "b", "c"]
    assert text.count("handoff") == sum(s.kind == "handoff" for s in stages) >= 4


def test_a_horizontal_client_with_other_clients_configured_is_refused_at_ready():
    base = Topology.vanilla(client="client", server="s", width=4)
    mine = Horizontal(base, client="client", clients=["a", "b"])
    theirs = Horizontal(base, client="client", clients=["a", "c"])
    assert mine.pair("a").view_fingerprint("a") != theirs.pair("a").view_fingerprint("a")
    with pytest.raises(ConfigError):
        Horizontal(base, client="client", clients=["a", "s"])


def test_a_sealed_handoff_opens_only_for_its_recipient_in_its_context():
    a, b, eve = new_key(), new_key(), new_key()
    state = SegmentState.pack(round=1, rows=3, arrays={"w/x": np.arange(4, dtype=np.float32)})
    box = seal(state, sender="a", recipient="b", key=a, recipient_public=public_bytes(b), context=b"run/h3")
    assert np.arange(4, dtype=np.float32).tobytes() not in box.ciphertext.tobytes()
    assert open_sealed(box, key=b, sender_public=public_bytes(a), context=b"run/h3").arrays()["w/x"].tolist() == [
        0, 1, 2, 3]
    flipped = box.ciphertext.copy()
    flipped[0] ^= 1
    for bad, key, sender_public, context in (
        (box, b, public_bytes(a), b"run/h5"),  # replayed into another stage
        (box, eve, public_bytes(a), b"run/h3"),  # someone else
        (box, b, public_bytes(eve), b"run/h3"),  # forged by another key holder
        (dataclasses.replace(box, ciphertext=flipped), b, public_bytes(a), b"run/h3"),
    ):
        with pytest.raises(ProtocolError, match="does not open"):
            open_sealed(bad, key=key, sender_public=sender_public, context=context)


def _tapped_run(kind, cuts, settings):
    h, init, xy = horizontal(kind, cuts), segments(kind, cuts), data()
    frames: list[tuple[str, str, object, bytes]] = []
    out = run(h, settings, init, xy, optimizer("adam"),
              taps=[lambda src, dst, msg, frame: frames.append((src, dst, msg, bytes(frame)))])
    return h, xy, out, frames


def test_the_relaying_server_forwards_ciphertext_and_never_sees_the_handed_weights():
    clear = Settings(kind="sequential", rounds=1, batch_size=BATCH, route="server", seal=False)
    h, _, out_clear, frames_clear = _tapped_run("vanilla", (2,), clear)
    _, _, out_sealed, frames_sealed = _tapped_run("vanilla", (2,), dataclasses.replace(clear, seal=True))

    def handed(frames):
        return [(m, f) for src, dst, m, f in frames
                if dst == h.server and src in h.clients and isinstance(m, SegmentState | SealedState)]

    in_clear, sealed = handed(frames_clear), handed(frames_sealed)
    assert len(in_clear) == len(sealed) == 2  # a -> b and b -> c, each through the server
    assert all(isinstance(m, SegmentState) for m, _ in in_clear) and all(isinstance(m, SealedState) for m, _ in sealed)
    tensors = [v.tobytes() for m, _ in in_clear for v in m.arrays().values() if v.nbytes >= 32]
    assert tensors and all(any(t in f for _, f in in_clear) for t in tensors)  # the tap sees clear weights...
    server_got = b"".join(f for _, dst, _, f in frames_sealed if dst == h.server)
    assert not any(t in server_got for t in tensors)  # ...and no handed tensor once sealed
    for c in h.clients:  # sealing changes nothing in what is learned
        for a, b in zip(out_clear[c].modules["bottom"].state_dict().values(),
                        out_sealed[c].modules["bottom"].state_dict().values(), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize(("kind", "cuts", "schedule"), [("vanilla", (2,), "splitfed_v1"),
                                                        ("u_shaped", (1, 3), "splitfed_v2")])
def test_no_frame_reaching_a_client_holds_another_clients_rows_or_labels(kind, cuts, schedule):
    h, xy, _, frames = _tapped_run(kind, cuts, Settings(kind=schedule, rounds=1, batch_size=BATCH))
    assert frames
    for client in h.clients:
        received = b"".join(f for _, dst, _, f in frames if dst == client)
        assert received
        for other, (x, y) in xy.items():
            if other == client:
                continue
            rows = [x[i].numpy().tobytes() for i in range(len(x))]
            assert not any(r in received for r in rows), f"{client} received a row of {other}"
            assert y.numpy().tobytes() not in received
