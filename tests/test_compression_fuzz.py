"""Fuzz the decoder on compressed frames: whatever a peer does to a packed or sparse tensor frame, decoding raises
ProtocolError or returns a valid message whose tensor decodes to finite float32 of its declared shape, and it never
allocates more than the frame holds; the training machine checks a declared shape before it decodes."""

from __future__ import annotations

import math
import struct
import tracemalloc

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsplit.errors import ProtocolError
from vsplit.models.rng import PartyRng
from vsplit.models.tabular import TabularMLP
from vsplit.protocol.training import Plan, SplitMachine
from vsplit.protocol.training.compression import Compressor, shape_of, values_of
from vsplit.protocol.training.messages import (
    EVAL,
    PackedActivations,
    PackedGradients,
    SparseGradients,
)
from vsplit.topology import Topology
from vsplit.transport import codec

SESSION = b"compressionfuzz!"
PACKED_TYPES = (PackedActivations.type_code, PackedGradients.type_code, SparseGradients.type_code)
#: What a decode may allocate besides copies of the frame's arrays: Python objects (message, dicts, views) and
#: the validation's temporaries, which are checked a chunk at a time (16 K entries) whatever the frame's size.
SLACK = 64 * 1024


def frames(rows: int, width: int) -> list[bytes]:
    """One valid frame per codec and message kind, for a (rows, width) tensor."""
    x = np.random.default_rng(rows).normal(size=(rows, width)).astype(np.float32)
    out = []
    for name in ("float16", "bfloat16", "int8"):
        out.append(Compressor(name).pack_activations(0, 0, EVAL, 1, 2, x))
        out.append(Compressor(name).pack_gradients(0, 0, 1, 2, x))
    out += [Compressor(n).pack_gradients(0, 0, 1, 2, x) for n in ("topk_0.25", "topk_0.5_float16")]
    return [bytes(codec.encode(m, session=SESSION, seq=3)) for m in out]


SMALL = frames(3, 5)
LARGE = frames(2048, 64)  # 132 KB (int8) to 524 KB (topk_0.25) each: more than the slack


def decodes_or_refuses(frame: bytes | bytearray) -> None:
    """The property: a ProtocolError, or a valid message whose tensor is finite float32 of its declared shape."""
    try:
        _, msg = codec.decode(frame)
    except ProtocolError:
        return
    if type(msg) in (PackedActivations, PackedGradients, SparseGradients):
        shape = shape_of(msg)
        if math.prod(shape) <= 1 << 20:  # a sparse shape is only decoded once checked (see the machine test)
            values = values_of(msg)
            assert values.dtype == np.float32 and values.shape == shape and np.isfinite(values).all()


def peak_while_decoding(frame: bytes | bytearray) -> int:
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        codec.decode(frame)
    except ProtocolError:
        pass
    return tracemalloc.get_traced_memory()[1] - before


@st.composite
def mutated(draw, pool: list[bytes]) -> bytes:
    """A valid compressed frame with a few bytes changed, mostly in the header and meta block (codec, dtypes,
    shapes), also in the arrays (scales, indices, values), truncated or extended."""
    frame = bytearray(draw(st.sampled_from(pool)))
    for _ in range(draw(st.integers(1, 5))):
        meta_end = min(len(frame), codec.HEADER_SIZE + struct.unpack_from("<I", frame, 32)[0]) if len(frame) >= 36 \
            else len(frame)
        kind = draw(st.sampled_from(["meta", "meta", "meta", "body", "u64", "truncate", "insert"]))
        if kind == "meta" and meta_end > codec.HEADER_SIZE:
            frame[draw(st.integers(codec.HEADER_SIZE, meta_end - 1))] = draw(st.integers(0, 255))
        elif kind == "body" and len(frame) > meta_end:
            frame[draw(st.integers(meta_end, len(frame) - 1))] = draw(st.integers(0, 255))
        elif kind == "u64" and meta_end - 8 > codec.HEADER_SIZE:  # a whole int field or dimension replaced
            at = draw(st.integers(codec.HEADER_SIZE, meta_end - 8))
            frame[at : at + 8] = struct.pack("<Q", draw(st.sampled_from([0, 1, 2, 3, 7, 2**31, 2**32, 2**63])))
        elif kind == "truncate":
            del frame[draw(st.integers(0, len(frame))) :]
        elif kind == "insert":
            at = draw(st.integers(0, len(frame)))
            frame[at:at] = draw(st.binary(min_size=1, max_size=8))
    return bytes(frame)


@st.composite
def forged(draw) -> bytes:
    """A valid header for a packed type, then attacker-chosen scalars, dtype codes, ranks and dimensions, and
    buffer bytes."""
    type_code = draw(st.sampled_from(PACKED_TYPES))
    layout = codec.layout_of(codec.lookup(type_code))
    numbers = [draw(st.sampled_from([0, 1, 2, 3, 4, -1, 2**40])) for _ in layout.numbers]
    arrays = []
    for _ in layout.arrays:
        dims = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 8, 2**20, 2**39]), min_size=4, max_size=4))
        arrays += [draw(st.integers(0, len(codec.DTYPES))), draw(st.integers(0, 5)), *dims]
    meta = struct.pack("<" + "q" * len(numbers) + "BB4Q" * len(layout.arrays), *numbers, *arrays)
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, type_code, 0, SESSION, 0, len(meta))
    return header + meta + draw(st.binary(max_size=256))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(SMALL))
def test_mutated_compressed_frames_only_ever_raise_protocol_error(frame):
    decodes_or_refuses(frame)
    decodes_or_refuses(bytearray(frame))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forged())
def test_forged_compressed_metadata_only_ever_raises_protocol_error(frame):
    decodes_or_refuses(frame)


@pytest.fixture
def traced():
    """Trace allocations during one test only (tracing slows everything else down)."""
    tracemalloc.start()
    yield
    tracemalloc.stop()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(frame=mutated(LARGE))
def test_decoding_a_mutated_compressed_frame_never_allocates_more_than_the_frame(traced, frame):
    assert peak_while_decoding(bytearray(frame)) <= len(frame) + SLACK  # arrays are views of a writable frame
    assert peak_while_decoding(frame) <= 2 * len(frame) + SLACK  # a read-only frame's arrays are copied once


def test_the_allocation_probe_sees_a_frame_sized_allocation(traced):
    frame = LARGE[0]
    assert peak_while_decoding(frame) >= len(frame) * 0.9  # the copy of a read-only frame's arrays is seen


def test_valid_compressed_frames_decode_and_re_encode_identically():
    for frame in SMALL + LARGE:
        header, msg = codec.decode(bytearray(frame))
        assert bytes(codec.encode(msg, session=header.session, seq=header.seq)) == frame


# -- the machine checks a declared shape before decoding it ----------------------------------------------------------
def partner_waiting_for_gradients() -> tuple[SplitMachine, int]:
    topology = Topology.vertical(label_party="bank", feature_parties=["shop"], width=4)
    torch.manual_seed(0)
    model = TabularMLP(cardinalities=[], n_numeric=2, hidden=(4,), out_dim=4)
    shop = SplitMachine(name="shop", topology=topology, modules={"shop": model},
                        optimizer=torch.optim.SGD(model.parameters(), lr=0.1), rng=PartyRng(0),
                        data={"shop": (torch.zeros(32, 0, dtype=torch.long), torch.randn(32, 2))})
    shop.start()
    plan = Plan(epochs=1, batch_size=8, seed=1, roles=np.zeros(32, np.uint8))
    out = shop.receive("bank", plan.to_message())
    assert len(out) == 1  # the first batch's activations went out; now it waits for their gradients
    return shop, out[0].message.cut


@pytest.mark.parametrize("shape", [(8, 2**31), (2**20, 4), (8, 4, 2)])
def test_a_sparse_gradient_of_another_shape_is_refused_before_it_is_decoded(shape):
    shop, cut = partner_waiting_for_gradients()
    msg = SparseGradients(cut=cut, slot=0, epoch=0, step=0, shape=np.array(shape, np.int64),
                          values=np.ones((shape[0], 1), np.float32),
                          indices=np.zeros((shape[0], 1), np.uint32))
    with pytest.raises(ProtocolError, match="sent gradients of shape"):
        shop.receive("bank", msg)
    assert not shop._inbox


def test_a_partner_accepts_a_sparse_gradient_of_the_batch_shape():
    shop, cut = partner_waiting_for_gradients()
    grads = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    before = [p.detach().clone() for p in shop.modules["shop"].parameters()]
    out = shop.receive("bank", Compressor("topk_0.5").pack_gradients(cut, 0, 0, 0, grads))
    assert shop.step == 1 and len(out) == 1  # step 0 applied, the next batch's activations went out
    assert any(not torch.equal(a, b) for a, b in zip(before, shop.modules["shop"].parameters(), strict=True))


def test_an_empty_array_with_huge_dimensions_is_refused_not_crashed_on():
    """Found by this fuzzing: numpy refuses to build an empty (0, 2^31, 2^31) view with a ValueError."""
    layout = codec.layout_of(PackedActivations)
    meta = struct.pack("<" + "q" * 6 + "BB4Q" * 2, 0, 0, 0, 0, 0, 1, 7, 3, 0, 2**31, 2**31, 0, 0, 1, 0, 0, 0, 0)
    assert len(meta) == layout.fixed.size
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, PackedActivations.type_code, 0, SESSION, 0,
                               len(meta))
    with pytest.raises(ProtocolError, match="empty, but with huge dimensions"):
        codec.decode(header + meta)
