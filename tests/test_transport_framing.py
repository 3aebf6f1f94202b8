"""The stream deframer: any split of the stream gives the same frames; bad prefixes cost no memory."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsplit.errors import TransportError
from vsplit.transport.framing import EAGER_BYTES, HEARTBEAT, Deframer, prefix

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


def test_a_declared_large_frame_costs_at_most_the_eager_buffer_until_its_bytes_arrive():
    d = Deframer()
    tracemalloc.start()
    try:
        assert d.feed((50 * 2**20).to_bytes(4, "little") + b"y" * 10) == []  # declares 50 MiB, sends 10 bytes
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert d.buffered == 10
    assert not d.at_boundary
    assert peak < EAGER_BYTES + 64 * 1024


def test_a_frame_larger_than_the_eager_buffer_grows_as_it_arrives_and_comes_out_whole():
    body = bytes(range(256)) * (3 * EAGER_BYTES // 256 + 7)  # a little over 3 MiB: the buffer doubles twice
    wire = prefix(body) + body + prefix(b"next") + b"next"
    d = Deframer(max_frame=len(body))
    out = []
    for start in range(0, len(wire), 300_001):
        out += [bytes(f) for f in d.feed(wire[start : start + 300_001])]
    assert out == [body, b"next"]
    assert d.at_boundary


def test_space_and_commit_let_a_record_layer_write_frames_in_place():
    wire = memoryview(prefix(b"abc") + b"abc" + HEARTBEAT + prefix(b"de") + b"de")
    d, frames = Deframer(max_frame=8), []
    while wire:
        room = d.space()
        n = min(len(room), len(wire), 2)  # at most two bytes at a time, as records of any size would come
        room[:n] = wire[:n]
        wire = wire[n:]
        if (frame := d.commit(n)) is not None:
            frames.append(bytes(frame))
    assert frames == [b"abc", b"de"]
    assert d.heartbeats == 1


def test_prefix_is_four_bytes_little_endian():
    assert prefix(b"x" * 258) == b"\x02\x01\x00\x00"
    with pytest.raises(ValueError):
        Deframer(max_frame=0)
