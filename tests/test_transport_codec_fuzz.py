"""Fuzz the frame decoder: whatever bytes a peer sends, decoding raises ProtocolError or returns a valid message."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsplit.errors import ProtocolError
from vsplit.protocol.abort import Abort
from vsplit.protocol.message import Message, message, require, require_array
from vsplit.transport import codec

SESSION = b"fuzz-session-id!"


@message(0x7E10)
@dataclass(frozen=True)
class FuzzBatch(Message):
    step: int
    values: np.ndarray
    ids: np.ndarray

    def __post_init__(self) -> None:
        require(self.step >= 0, "step must be >= 0")
        require_array("values", self.values, dtype="float32", ndim=2)
        require_array("ids", self.ids, dtype="int64", ndim=1)


@message(0x7E11)
@dataclass(frozen=True)
class FuzzScalars(Message):
    rate: float
    name: str
    flag: bool
    count: int


@message(0x7E12)
@dataclass(frozen=True)
class FuzzArray(Message):
    values: np.ndarray


def valid_frames() -> list[bytes]:
    batch = FuzzBatch(step=3, values=np.arange(12, dtype=np.float32).reshape(3, 4), ids=np.arange(3))
    return [
        codec.encode(batch, session=SESSION, seq=1),
        codec.encode(FuzzScalars(rate=0.5, name="bank", flag=True, count=7), session=SESSION, seq=2),
        codec.encode(Abort(code=2), session=SESSION, seq=0),
    ]


def decodes_or_refuses(frame: bytes | bytearray) -> None:
    """The property: a decoded frame is a valid message; anything else is a ProtocolError."""
    try:
        header, msg = codec.decode(frame)
    except ProtocolError:
        return
    assert isinstance(msg, Message) and header.type_code == msg.type_code


@st.composite
def mutated_frames(draw) -> bytes:
    frame = bytearray(draw(st.sampled_from(valid_frames())))
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "meta_len", "type"]))
        if kind == "flip" and frame:
            i = draw(st.integers(min_value=0, max_value=len(frame) - 1))
            frame[i] = draw(st.integers(min_value=0, max_value=255))
        elif kind == "truncate":
            del frame[draw(st.integers(min_value=0, max_value=len(frame))) :]
        elif kind == "insert":
            i = draw(st.integers(min_value=0, max_value=len(frame)))
            frame[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete" and frame:
            i = draw(st.integers(min_value=0, max_value=len(frame) - 1))
            del frame[i : i + draw(st.integers(min_value=1, max_value=16))]
        elif kind == "meta_len" and len(frame) >= codec.HEADER_SIZE:
            frame[32:36] = struct.pack("<I", draw(st.integers(min_value=0, max_value=2**32 - 1)))
        elif kind == "type" and len(frame) >= codec.HEADER_SIZE:
            frame[4:6] = struct.pack("<H", draw(st.sampled_from([0, 1, 0x7E10, 0x7E11, 0x7EFF, 0xFFFF])))
    return bytes(frame)


@st.composite
def frames_with_forged_metadata(draw) -> bytes:
    """A valid header for a known type, then attacker-chosen meta fields (dtype codes, ranks, shapes, string
    lengths, bool bytes, floats) and buffer bytes, or raw random meta bytes."""
    type_code = draw(st.sampled_from([0x0001, FuzzBatch.type_code, FuzzScalars.type_code]))
    if draw(st.booleans()):
        meta = draw(st.binary(max_size=120))
    elif type_code == FuzzBatch.type_code:
        arrays = []
        for _ in range(2):
            ndim = draw(st.integers(min_value=0, max_value=6))
            dims = draw(st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=4, max_size=4))
            arrays += [draw(st.integers(min_value=0, max_value=255)), ndim, *dims]
        meta = struct.pack("<q" + "BB4Q" * 2, draw(st.integers(min_value=-(2**63), max_value=2**63 - 1)), *arrays)
    elif type_code == FuzzScalars.type_code:
        rate = draw(st.floats(allow_nan=True, allow_infinity=True))
        text = draw(st.binary(max_size=12))
        size = draw(st.sampled_from([len(text), len(text) + 1, 2**32 - 1, 0]))
        meta = struct.pack("<dBq", rate, draw(st.integers(min_value=0, max_value=255)), 3) + struct.pack("<I", size)
        meta += text
    else:
        meta = struct.pack("<q", draw(st.integers(min_value=-(2**63), max_value=2**63 - 1)))
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, type_code, 0, SESSION, 0, len(meta))
    return header + meta + draw(st.binary(max_size=128))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=256))
def test_random_bytes_never_crash_the_decoder(data):
    decodes_or_refuses(data)
    decodes_or_refuses(codec.MAGIC + bytes([codec.WIRE_VERSION]) + data)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_frames())
def test_mutated_frames_never_crash_the_decoder(frame):
    decodes_or_refuses(frame)
    decodes_or_refuses(bytearray(frame))  # the writable path the stream channels take


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames_with_forged_metadata())
def test_forged_metadata_never_crashes_the_decoder(frame):
    decodes_or_refuses(frame)


def _frame(type_code: int, meta: bytes, body: bytes = b"") -> bytes:
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, type_code, 0, SESSION, 0, len(meta))
    return header + meta + body


def _scalars(rate: float = 0.5, flag: int = 1, text: bytes = b"bank", size: int | None = None) -> bytes:
    size = len(text) if size is None else size
    return _frame(FuzzScalars.type_code, struct.pack("<dBqI", rate, flag, 7, size) + text)


def _batch(code: int = 0, ndim: int = 2, dims: tuple = (1, 1, 0, 0), body: bytes = b"\0" * 12) -> bytes:
    ids = struct.pack("<BB4Q", 2, 1, 1, 0, 0, 0)  # int64, shape (1,)
    return _frame(FuzzBatch.type_code, struct.pack("<q", 3) + struct.pack("<BB4Q", code, ndim, *dims) + ids, body)


@pytest.mark.parametrize(
    ("frame", "says"),
    [
        (_scalars(rate=math.nan), "finite"),
        (_scalars(rate=math.inf), "finite"),
        (_scalars(flag=2), "bool"),
        (_scalars(text=b"\xff\xfe"), "UTF-8"),
        (_scalars(size=2**32 - 1), "past the metadata"),
        (_scalars(size=3), "unexpected bytes"),
        (_batch(code=200), "dtype code"),
        (_batch(ndim=5), "rank"),
        (_batch(dims=(1, 1, 7, 0)), "bad shape"),
        (_batch(dims=(2**41, 1, 0, 0)), "bad shape"),
        (_batch(dims=(1_000_000, 1_000_000, 0, 0)), "needs"),
        (_batch(body=b"\0" * 13), "trailing bytes"),
        (_batch(code=1, body=b"\0" * 16), "dtype float32"),  # float64 where the message wants float32
    ],
    ids=["nan", "infinity", "bool-byte-2", "bad-utf8", "string-too-long", "meta-leftover", "dtype-code", "rank",
         "dims-beyond-rank", "huge-dim", "shape-beyond-frame", "trailing", "wrong-dtype"],
)
def test_malformed_meta_refused_with_a_reason(frame, says):
    with pytest.raises(ProtocolError, match=says):
        codec.decode(frame)


def test_the_forged_frames_helpers_build_valid_frames():
    """The malformed cases above differ from a valid frame in one field only."""
    assert codec.decode(_scalars())[1] == FuzzScalars(rate=0.5, name="bank", flag=True, count=7)
    msg = codec.decode(_batch())[1]
    assert msg.step == 3 and msg.values.shape == (1, 1) and msg.ids.tolist() == [0]


def test_encode_refuses_what_the_wire_cannot_carry():
    with pytest.raises(ProtocolError, match="wire type"):
        codec.encode(FuzzScalars(rate=0.5, name="x", flag=True, count=2**63), session=SESSION, seq=0)
    with pytest.raises(ProtocolError, match="non-finite"):
        codec.encode(FuzzScalars(rate=math.inf, name="x", flag=True, count=1), session=SESSION, seq=0)
    for values in (np.zeros((1, 1, 1, 1, 1), np.float32), np.zeros(2, np.int16), np.array(["x"])):
        with pytest.raises(ProtocolError, match="cannot go on the wire"):
            codec.encode(FuzzArray(values=values), session=SESSION, seq=0)


def test_big_endian_arrays_are_sent_little_endian():
    values = np.arange(6, dtype=">f4").reshape(2, 3)
    frame = codec.encode(FuzzArray(values=values), session=SESSION, seq=0)
    assert np.array_equal(codec.decode(frame)[1].values, values)


def test_valid_frames_round_trip():
    for frame in valid_frames():
        header, msg = codec.decode(bytearray(frame))
        assert codec.encode(msg, session=header.session, seq=header.seq) == frame
