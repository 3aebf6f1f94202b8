"""Fuzz the frame decoder: whatever bytes a peer sends, decoding raises ProtocolError or returns a valid message."""

from __future__ import annotations

import json
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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def frames_with_forged_metadata(draw) -> bytes:
    """A valid header for a known type, then attacker-chosen JSON metadata and buffer bytes."""
    type_code = draw(st.sampled_from([0x0001, 0x7E10, 0x7E11]))
    names = ["values", "ids", "x"]
    dtypes = ["float32", "float64", "int64", "float16", "object", "<f4", "bool", 3]
    arrays = draw(st.lists(
        st.tuples(st.sampled_from(names), st.sampled_from(dtypes),
                  st.lists(st.integers(min_value=-2, max_value=2**41), max_size=5)).map(list),
        max_size=3,
    ))
    scalars = draw(st.dictionaries(st.sampled_from(["step", "rate", "name", "flag", "count", "code", "zz"]),
                                   json_values, max_size=5))
    meta = draw(st.sampled_from([{"f": scalars, "a": arrays}, {"f": scalars}, [scalars], scalars]))
    body = json.dumps(meta).encode()
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, type_code, 0, SESSION, 0, len(body))
    return header + body + draw(st.binary(max_size=128))


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


@pytest.mark.parametrize(
    "scalars",
    [
        '"rate":1' + "0" * 400 + ',"name":"x","flag":true,"count":1',  # an int too large for a float
        '"rate":1.0,"name":"x","flag":true,"count":' + "9" * 5000,  # over Python's int-digits limit
        '"rate":1e999,"name":"x","flag":true,"count":1',  # parses as infinity
        '"rate":NaN,"name":"x","flag":true,"count":1',
    ],
    ids=["float-overflow", "huge-int-literal", "infinity", "nan"],
)
def test_extreme_numbers_refused_as_protocol_errors(scalars):
    body = ('{"f":{' + scalars + '},"a":[]}').encode()
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, FuzzScalars.type_code, 0, SESSION, 0, len(body))
    with pytest.raises(ProtocolError):
        codec.decode(header + body)


def test_valid_frames_round_trip():
    for frame in valid_frames():
        header, msg = codec.decode(bytearray(frame))
        assert codec.encode(msg, session=header.session, seq=header.seq) == frame
