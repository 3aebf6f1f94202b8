"""Compression codecs for the tensors that cross a cut: each round-trips through real frames within its documented
bound, the narrow ones are as small as promised, error feedback stops errors adding up, top-k keeps exactly the
largest entries, and a packed message that is inconsistent in any way is refused before it is decoded."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vsplit.config import load_config
from vsplit.errors import ConfigError, ProtocolError
from vsplit.protocol.training.compression import Compressor, codec_names, get_codec, shape_of, values_of
from vsplit.protocol.training.messages import (
    CODEC_BFLOAT16,
    CODEC_FLOAT16,
    CODEC_INT8,
    EVAL,
    TRAIN,
    Activations,
    Gradients,
    PackedActivations,
    PackedGradients,
    SparseGradients,
)
from vsplit.transport import codec

REPO = Path(__file__).resolve().parents[1]
SESSION = b"compression-test"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def through_the_wire(msg):
    """Encode ``msg`` as a frame and decode it as a receiver would; the decoded message and the frame's size."""
    frame = codec.encode(msg, session=SESSION, seq=0)
    _, decoded = codec.decode(bytes(frame))
    assert type(decoded) is type(msg)
    return decoded, len(frame)


def tensors(limit: float, *, max_rows: int = 6, max_width: int = 9):
    """float32 tensors (rows, width) with entries of any magnitude up to ``limit``, tiny and subnormal ones, and
    often a row of zeros."""
    limit, tiny = float(np.float32(limit)), float(np.float32(1e-30))
    magnitudes = st.one_of(
        st.floats(-limit, limit, width=32),
        st.floats(-tiny, tiny, width=32),  # float32 subnormals and float16's flush-to-zero range
        st.sampled_from([0.0, -0.0, limit, -limit, 1.0, -1.0]),
    )
    shape = st.tuples(st.integers(1, max_rows), st.integers(1, max_width))
    return st.tuples(hnp.arrays(np.float32, shape, elements=magnitudes), st.booleans()).map(_zero_a_row)


def _zero_a_row(drawn):
    values, zero = drawn
    if zero:
        values[0] = 0
    return values


# -- round trips within each codec's bound ---------------------------------------------------------------------------
@FAST
@given(tensors(65504))
def test_float16_round_trip_is_within_2_to_the_minus_11_relative(x):
    msg, _ = through_the_wire(Compressor("float16").pack_gradients(0, 0, 0, 0, x))
    assert isinstance(msg, PackedGradients) and msg.data.dtype == np.float16
    back = values_of(msg)
    assert back.dtype == np.float32 and back.shape == x.shape
    err = np.abs(back.astype(np.float64) - x)
    assert (err <= np.maximum(2.0**-11 * np.abs(x.astype(np.float64)), 2.0**-25)).all()


def test_float16_refuses_values_it_cannot_carry_instead_of_clipping():
    with pytest.raises(ProtocolError, match="65504") as info:
        Compressor("float16").pack_activations(0, 0, TRAIN, 0, 0, np.array([[1.0, 70000.0]], np.float32))
    assert info.value.local


@FAST
@given(tensors(3.0e38))
def test_bfloat16_round_trip_is_within_2_to_the_minus_8_relative(x):
    msg, _ = through_the_wire(Compressor("bfloat16").pack_activations(1, 0, EVAL, 2, 3, x))
    assert isinstance(msg, PackedActivations) and msg.data.dtype == np.uint16 and (msg.cut, msg.step) == (1, 3)
    err = np.abs(values_of(msg).astype(np.float64) - x)
    assert (err <= np.maximum(2.0**-8 * np.abs(x.astype(np.float64)), 2.0**-134)).all()


@FAST
@given(tensors(1e38, max_width=40))
def test_int8_round_trip_is_within_absmax_over_254_per_row(x):
    msg, _ = through_the_wire(Compressor("int8").pack_gradients(0, 0, 0, 0, x))
    assert msg.data.dtype == np.int8 and msg.scales.shape == (len(x),)
    absmax = np.abs(x.astype(np.float64)).max(axis=1, keepdims=True)
    err = np.abs(values_of(msg).astype(np.float64) - x)
    assert (err <= absmax / 254 * (1 + 2.0**-15) + 2.0**-148).all()
    assert (values_of(msg)[absmax[:, 0] == 0] == 0).all()  # a row of zeros decodes exactly


def test_int8_on_a_four_dimensional_tensor_scales_each_flattened_row():
    x = np.random.default_rng(0).normal(size=(3, 2, 4, 4)).astype(np.float32)
    x[1] *= 1000
    msg, _ = through_the_wire(Compressor("int8").pack_activations(0, 0, TRAIN, 0, 0, x))
    assert msg.data.shape == x.shape and shape_of(msg) == x.shape
    bound = np.abs(x).reshape(3, -1).max(axis=1) / 254 * (1 + 2.0**-15)
    assert (np.abs(values_of(msg) - x).reshape(3, -1).max(axis=1) <= bound).all()


@FAST
@given(tensors(1e30, max_width=30), st.sampled_from(["0.1", "0.25", "0.5", "0.9", "1"]), st.booleans())
def test_topk_keeps_exactly_the_largest_entries_of_each_row(x, fraction, half):
    name = f"topk_{fraction}" + ("_float16" if half else "")
    if half:
        x = np.clip(x, -65504, 65504)
    msg, _ = through_the_wire(Compressor(name).pack_gradients(0, 0, 0, 0, x))
    assert isinstance(msg, SparseGradients) and msg.values.dtype == (np.float16 if half else np.float32)
    width = x.shape[1]
    k = max(1, math.ceil(Fraction(fraction) * width))
    assert msg.indices.shape == (len(x), k)
    back = values_of(msg)
    for row, out, kept in zip(x, back, msg.indices, strict=True):
        dropped = np.setdiff1d(np.arange(width), kept)
        assert (out[dropped] == 0).all()
        expected = row[kept].astype(np.float16).astype(np.float32) if half else row[kept]
        assert np.array_equal(out[kept], expected)
        if len(dropped):
            assert np.abs(row[kept]).min() >= np.abs(row[dropped]).max()


def test_topk_k_is_computed_exactly_from_the_fraction():
    assert [get_codec("topk_0.1").k(w) for w in (1, 10, 30, 31)] == [1, 1, 3, 4]
    assert get_codec("topk_1").k(64) == 64


def test_a_topk_party_sends_its_activations_uncompressed():
    x = np.ones((2, 3), np.float32)
    msg = Compressor("topk_0.5").pack_activations(0, 0, TRAIN, 0, 0, x)
    assert type(msg) is Activations and msg.values is x


def test_none_sends_todays_plain_messages():
    x = np.ones((2, 3), np.float32)
    compressor = Compressor("none", error_feedback=True)
    assert type(compressor.pack_activations(0, 0, TRAIN, 0, 0, x)) is Activations
    grads = compressor.pack_gradients(0, 1, 2, 3, x)
    assert type(grads) is Gradients and grads.values is x and values_of(grads) is x


def test_non_finite_tensors_are_refused_by_the_sender():
    x = np.array([[1.0, np.nan]], np.float32)
    for name in ("float16", "bfloat16", "int8", "topk_0.5"):
        with pytest.raises(ProtocolError, match="not finite") as info:
            Compressor(name).pack_gradients(0, 0, 0, 0, x)
        assert info.value.local


# -- bytes -----------------------------------------------------------------------------------------------------------
def test_int8_frames_are_at_most_027_and_float16_051_of_float32_for_a_256_by_64_tensor():
    x = np.random.default_rng(0).normal(size=(256, 64)).astype(np.float32)
    _, plain = through_the_wire(Compressor("none").pack_activations(0, 0, TRAIN, 0, 0, x))
    sizes = {name: through_the_wire(Compressor(name).pack_activations(0, 0, TRAIN, 0, 0, x))[1]
             for name in ("float16", "bfloat16", "int8")}
    assert sizes["int8"] <= 0.27 * plain
    assert sizes["float16"] <= 0.51 * plain and sizes["bfloat16"] <= 0.51 * plain
    _, sparse = through_the_wire(Compressor("topk_0.1").pack_gradients(0, 0, 0, 0, x))
    assert sparse <= 0.25 * plain  # 7 of 64 entries, 8 bytes each


# -- error feedback --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["int8", "float16", "topk_0.25"])
def test_error_feedback_stops_the_errors_of_repeated_sends_from_adding_up(name):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 16)).astype(np.float32)
    x[:, 0] = 1000.0  # int8: a large entry per row makes the small ones lose precision
    sends = 50
    total = {}
    for feedback in (False, True):
        compressor = Compressor(name, error_feedback=feedback)
        sent = [values_of(compressor.pack_gradients(0, 0, 0, step, x)) for step in range(sends)]
        total[feedback] = np.abs(np.sum(sent, axis=0, dtype=np.float64) - sends * x.astype(np.float64)).max()
    one_send = np.abs(values_of(Compressor(name).pack_gradients(0, 0, 0, 0, x)) - x).max()
    assert total[False] > 0.9 * sends * one_send  # without feedback the same error repeats
    assert total[True] < total[False] / 10  # with it, the error does not grow with the number of sends
    if name != "topk_0.25":  # what crossed sums to what was meant, up to one send's error
        assert total[True] <= 2 * one_send + 1e-3


def test_error_feedback_keeps_one_residual_per_stream_and_none_outside_training():
    x = np.full((4, 3), 0.3, np.float32)
    x[:, 0] = 100.0
    compressor = Compressor("int8", error_feedback=True)
    first = values_of(compressor.pack_activations(0, 0, TRAIN, 0, 0, x))
    memoryless = values_of(Compressor("int8").pack_activations(0, 0, TRAIN, 0, 0, x))
    assert np.array_equal(first, memoryless)
    other_slot = values_of(compressor.pack_activations(0, 1, TRAIN, 0, 0, x))  # another stream: no residual yet
    assert np.array_equal(other_slot, memoryless)
    scoring = values_of(compressor.pack_activations(0, 0, EVAL, 0, 0, x))  # evaluation: never a residual
    assert np.array_equal(scoring, memoryless)
    second = values_of(compressor.pack_activations(0, 0, TRAIN, 0, 1, x))
    assert not np.array_equal(second, memoryless)
    smaller = values_of(compressor.pack_activations(0, 0, TRAIN, 0, 2, x[:2]))  # the last, smaller batch
    assert smaller.shape == (2, 3)


# -- refusals before decoding ----------------------------------------------------------------------------------------
def dense(code=CODEC_INT8, data=None, scales=None, cls=PackedActivations):
    data = np.zeros((2, 3), np.int8) if data is None else data
    scales = np.ones(2, np.float32) if scales is None else scales
    extra = {"phase": TRAIN} if cls is PackedActivations else {}
    return cls(cut=0, slot=0, epoch=0, step=0, codec=code, data=data, scales=scales, **extra)


def sparse(shape=(2, 4), values=None, indices=None):
    values = np.ones((2, 2), np.float32) if values is None else values
    indices = np.array([[0, 3], [1, 2]], np.uint32) if indices is None else indices
    return SparseGradients(cut=0, slot=0, epoch=0, step=0, shape=np.array(shape, np.int64), values=values,
                           indices=indices)


NO_SCALES = np.zeros(0, np.float32)
REFUSED = {
    "unknown codec": lambda: dense(code=9),
    "plain codec code": lambda: dense(code=0),
    "int8 data as uint8": lambda: dense(data=np.zeros((2, 3), np.uint8)),
    "float16 codec with int8 data": lambda: dense(code=CODEC_FLOAT16, scales=NO_SCALES),
    "one-dimensional data": lambda: dense(data=np.zeros(6, np.int8)),
    "a scale missing": lambda: dense(scales=np.ones(1, np.float32)),
    "scales as float64": lambda: dense(scales=np.ones(2)),
    "infinite scale": lambda: dense(scales=np.array([1, np.inf], np.float32)),
    "NaN scale": lambda: dense(scales=np.array([1, np.nan], np.float32)),
    "negative scale": lambda: dense(scales=np.array([1, -1], np.float32)),
    "scale overflowing 127x": lambda: dense(scales=np.array([1, 3e38], np.float32)),
    "int8 -128": lambda: dense(data=np.full((2, 3), -128, np.int8)),
    "float16 with scales": lambda: dense(code=CODEC_FLOAT16, data=np.zeros((2, 3), np.float16)),
    "float16 infinity": lambda: dense(code=CODEC_FLOAT16, data=np.full((2, 3), np.inf, np.float16),
                                      scales=NO_SCALES),
    "bfloat16 NaN pattern": lambda: dense(code=CODEC_BFLOAT16, data=np.full((2, 3), 0x7FC0, np.uint16),
                                          scales=NO_SCALES, cls=PackedGradients),
    "negative step": lambda: PackedGradients(cut=0, slot=0, epoch=0, step=-1, codec=CODEC_INT8,
                                             data=np.zeros((2, 3), np.int8), scales=np.ones(2, np.float32)),
    "unknown phase": lambda: PackedActivations(cut=0, slot=0, phase=7, epoch=0, step=0, codec=CODEC_INT8,
                                               data=np.zeros((2, 3), np.int8), scales=np.ones(2, np.float32)),
    "sparse index out of range": lambda: sparse(indices=np.array([[0, 4], [1, 2]], np.uint32)),
    "sparse index duplicated": lambda: sparse(indices=np.array([[0, 0], [1, 2]], np.uint32)),
    "sparse indices not ascending": lambda: sparse(indices=np.array([[3, 0], [1, 2]], np.uint32)),
    "sparse indices as int64": lambda: sparse(indices=np.array([[0, 3], [1, 2]])),
    "sparse values and indices differ": lambda: sparse(values=np.ones((2, 1), np.float32)),
    "sparse rows differ from shape": lambda: sparse(shape=(3, 4)),
    "sparse k above width": lambda: sparse(shape=(2, 1)),
    "sparse zero width": lambda: sparse(shape=(2, 0)),
    "sparse rank 1 shape": lambda: sparse(shape=(2,)),
    "sparse rank 5 shape": lambda: sparse(shape=(2, 1, 1, 1, 4)),
    "sparse values float64": lambda: sparse(values=np.ones((2, 2))),
    "sparse non-finite value": lambda: sparse(values=np.array([[1, np.nan], [1, 1]], np.float32)),
    "sparse row wider than uint32": lambda: sparse(shape=(2, 2**16, 2**16, 2)),
}


@pytest.mark.parametrize("build", REFUSED.values(), ids=REFUSED.keys())
def test_an_inconsistent_packed_message_is_refused_when_built(build):
    with pytest.raises(ProtocolError):
        build()


def test_the_refusal_helpers_build_valid_messages():
    """Each refused case above differs from one of these valid messages in one field."""
    assert values_of(dense()).shape == (2, 3)
    assert values_of(sparse()).tolist() == [[1, 0, 0, 1], [0, 1, 1, 0]]
    assert shape_of(sparse(shape=(2, 2, 2))) == (2, 2, 2) and values_of(sparse(shape=(2, 2, 2))).shape == (2, 2, 2)


# -- names and config ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["int9", "topk_0", "topk_1.5", "topk_abc", "topk_1/2", "topk_-0.1", "topk_nan", ""])
def test_an_unknown_codec_name_lists_the_valid_ones(name):
    with pytest.raises(ConfigError, match="valid: none, float16, bfloat16, int8, topk_<fraction>"):
        get_codec(name)


def test_every_listed_name_is_a_codec():
    for name in codec_names():
        assert get_codec(name.replace("<fraction>", "0.3")).name == name.replace("<fraction>", "0.3")


def test_the_config_names_the_key_of_an_unknown_compression():
    with pytest.raises(ConfigError, match=r"network\.compression: unknown compression 'zip'; valid: none"):
        load_config(REPO / "parties/bank/party.toml", check_files=False, overrides=['network.compression="zip"'])
    with pytest.raises(ConfigError, match=r"network\.error_feedback: needs a lossy compression"):
        load_config(REPO / "parties/bank/party.toml", check_files=False, overrides=["network.error_feedback=true"])
    config = load_config(REPO / "parties/partner/party.toml", check_files=False,
                         overrides=['network.compression="int8"', "network.error_feedback=true"])
    assert (config.network.compression, config.network.error_feedback) == ("int8", True)


def test_checking_the_compression_of_a_config_does_not_import_torch():
    code = ("import sys\nfrom vsplit.config import load_config\n"
            "load_config('parties/bank/party.toml', check_files=False, overrides=['network.compression=\"int8\"'])\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_wire_dtype_codes_are_only_appended():
    """Old frames decode the same: the first seven codes are today's."""
    assert list(codec.DTYPES) == ["float32", "float64", "int64", "int32", "uint32", "uint8", "bool",
                                  "float16", "uint16", "int8"]
    frame = codec.encode(Activations(cut=0, slot=0, phase=TRAIN, epoch=0, step=0,
                                     values=np.ones((1, 2), np.float32)), session=SESSION, seq=0)
    assert frame[codec.HEADER_SIZE + 5 * 8] == 0  # the float32 array's dtype code, right after five i64 fields
