"""The stream deframer: any split of the stream gives the same frames; bad prefixes cost no memory."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsplit.errors import TransportError
from vsplit.transport.framing import HEARTBEAT, Deframer, prefix

frames_strategy = st.lists(st.one_of(st.binary(min_size=1, max_size=300), st.just(b"")), max_size=12)


def stream_of(frames: list[bytes]) -> bytes:
    return b"".join(HEARTBEAT if not f else prefix(f) + f for f in frames)


def test_stream_fed_one_byte_at_a_time_gives_the_frames():
    frames = [b"a", b"bc" * 100, b"", b"\x00\x00\x00\x00", b"xyz"]
    wire = stream_of(frames)
    d = Deframer(max_frame=1000)
    out = [bytes(f) for i in range(len(wire)) for f in d.feed(wire[i : i + 1])]
    assert out == [f for f in frames if f]
    assert d.heartbeats == 1 and d.at_boundary


def test_stream_split_at_every_byte_gives_the_frames():
    frames = [b"first", b"", b"second frame", b"3"]
    wire = stream_of(frames)
    for cut in range(len(wire) + 1):
        d = Deframer(max_frame=100)
        out = [bytes(f) for f in d.feed(wire[:cut]) + d.feed(wire[cut:])]
        assert out == [b"first", b"second frame", b"3"], cut


@settings(max_examples=300, deadline=None)
@given(frames=frames_strategy, cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20))
def test_any_split_of_the_stream_gives_the_same_frames(frames, cuts):
    wire = stream_of(frames)
    bounds = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    d = Deframer(max_frame=300)
    out = []
    for start, end in itertools.pairwise(bounds):
        out += [bytes(f) for f in d.feed(wire[start:end])]
    assert out == [f for f in frames if f]
    assert d.heartbeats == frames.count(b"")
    assert d.at_boundary


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2000), cut=st.integers(min_value=0, max_value=2000))
def test_random_bytes_only_ever_give_frames_or_a_transport_error(data, cut):
    d = Deframer(max_frame=512)
    try:
        for frame in d.feed(data[:cut]) + d.feed(data[cut:]):
            assert 0 < len(frame) <= 512
    except TransportError:
        with pytest.raises(TransportError):  # once out of step, it stays refused
            d.feed(b"\x01\x00\x00\x00x")
    assert d.buffered <= 512


def test_declared_2_gib_frame_refused_without_allocating():
    d = Deframer()  # default cap: 64 MiB
    tracemalloc.start()
    try:
        with pytest.raises(TransportError, match="frame of 2147483648 bytes, over the cap of 67108864"):
            d.feed((2**31).to_bytes(4, "little") + b"x" * 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_partial_frame_grows_only_with_the_bytes_that_arrived():
    d = Deframer()
    assert d.feed((50 * 2**20).to_bytes(4, "little") + b"y" * 10) == []  # declares 50 MiB, sends 10 bytes
    assert d.buffered == 10
    assert not d.at_boundary


def test_prefix_is_four_bytes_little_endian():
    assert prefix(b"x" * 258) == b"\x02\x01\x00\x00"
    with pytest.raises(ValueError):
        Deframer(max_frame=0)
