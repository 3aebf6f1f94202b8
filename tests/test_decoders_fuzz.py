"""Every decoder of untrusted bytes, fuzzed: whatever a peer sends or a file holds, reading it returns something valid
or raises one of vsplit's own errors, allocates no more than the input, and ends quickly.

The targets (benchmarks/fuzzing/targets.py) are the ones `make fuzz` runs under Atheris; here Hypothesis mutates
their seed corpus and forges frames field by field, a few hundred examples each (seconds in all).
"""

from __future__ import annotations

import struct
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))

from fuzzing.targets import TARGETS, _families, corpus_dir, expected

from vsplit.errors import CheckpointError, ConfigError, DataError, ProtocolError, VsplitError
from vsplit.protocol.message import fields_of
from vsplit.transport import codec

FAST = settings(max_examples=120, deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
WIRE = ["psi_messages", "secagg_messages", "horizontal_messages", "sealed_frames", "training_messages"]


def refuses_cleanly(name: str, data: bytes) -> None:
    try:
        TARGETS[name].run(data)
    except Exception as exc:
        assert expected(exc), f"{name}: {type(exc).__name__}: {exc}"


@st.composite
def mutated(draw, name: str) -> bytes:
    seeds = SEEDS[name]
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "word"]))
        at = draw(st.integers(min_value=0, max_value=len(data)))
        if kind == "flip" and at < len(data):
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif kind == "delete":
            del data[at : at + draw(st.integers(min_value=1, max_value=12))]
        else:  # an extreme little-endian word: counts, lengths and dimensions at their edges
            data[at : at + 8] = struct.pack("<Q", draw(st.sampled_from([0, 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1])))
    return bytes(data)


SEEDS = {name: target.seeds() for name, target in TARGETS.items()}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_target_has_a_seed_corpus_in_the_repository_that_it_reads(name):
    kept = sorted(corpus_dir(name).iterdir())
    assert kept and sum(p.stat().st_size for p in kept) < 64 * 1024
    for path in kept:
        refuses_cleanly(name, path.read_bytes())
    valid = 0
    for seed in SEEDS[name]:
        try:
            TARGETS[name].run(seed)
            valid += 1
        except VsplitError:
            pass
    assert valid >= 1  # the corpus starts the fuzzer from inputs that decode


@pytest.mark.parametrize("name", sorted(TARGETS))
@FAST
@given(data=st.data())
def test_mutated_inputs_decode_or_raise_vsplit_errors(name, data):
    refuses_cleanly(name, data.draw(mutated(name)))


@st.composite
def forged_frames(draw) -> bytes:
    """A valid header for a real message type, then attacker-chosen scalars, array descriptors and bytes."""
    family = draw(st.sampled_from(["psi", "secagg", "horizontal", "training", "sealed"]))
    cls = draw(st.sampled_from(_families()[family]))
    layout = codec.layout_of(cls)
    numbers: list[object] = []
    for _, kind in fields_of(cls):
        if kind is int:
            numbers.append(draw(st.sampled_from([0, 1, 2, 7, 64, 2**40, -1, 2**63 - 1, -(2**63)])))
        elif kind is float:
            numbers.append(draw(st.sampled_from([0.0, 0.5, -1.0, 1e300, float("nan")])))
        elif kind is bool:
            numbers.append(draw(st.integers(min_value=0, max_value=2)))
    total = 0
    for _ in layout.arrays:
        code = draw(st.integers(min_value=0, max_value=len(codec.DTYPES)))
        shape = draw(st.lists(st.sampled_from([0, 1, 2, 3, 8, 32, 2**20]), min_size=0, max_size=3))
        numbers += [code, len(shape), *shape, *(0,) * (codec.MAX_NDIM - len(shape))]
        if code < len(codec.DTYPES) and int(np.prod(shape)) <= 4096:
            total += int(np.prod(shape)) * list(codec.DTYPES.values())[code].itemsize
    strings = b"".join(struct.pack("<I", len(s)) + s for s in
                       (draw(st.sampled_from([b"", b"bank", b"a\nb", b"\xff", b"w/x\nw/x"])) for _ in layout.strings))
    meta = layout.fixed_in.pack(*numbers) + strings
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, cls.type_code, 0, b"s" * 16, 0, len(meta))
    body = draw(st.sampled_from([bytes(total), bytes([0xFF]) * total, np.arange(total, dtype=np.uint8).tobytes()]))
    return header + meta + body + draw(st.sampled_from([b"", b"\x00"]))


@FAST
@given(forged_frames())
def test_forged_fields_of_every_real_message_type_decode_or_raise_protocol_errors(frame):
    for name in WIRE:
        refuses_cleanly(name, frame)


@settings(max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(forged_frames())
def test_decoding_a_frame_allocates_no_more_than_the_frame(frame):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            codec.decode(bytes(frame))  # read-only: the decoder copies arrays out, at most the frame's size
        except ProtocolError:
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 2 * len(frame) + 64 * 1024


def test_a_checkpoint_declaring_a_huge_array_is_refused_before_it_is_allocated(tmp_path):
    import io
    import json
    import zipfile

    from numpy.lib import format as npy

    from vsplit.runtime.checkpoint import FORMAT, load_checkpoint

    meta = {"format": FORMAT, "run_id": "r1", "party": "bank", "tree": {"__array__": "a0"}}
    huge = io.BytesIO()
    npy.write_array_header_1_0(huge, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)})
    path = tmp_path / "epoch-0001.npz"
    with zipfile.ZipFile(path, "w") as archive:  # stored, as np.savez writes: 8 bytes that claim 8 TiB
        archive.writestr("a0.npy", huge.getvalue() + bytes(8))
        meta_array = io.BytesIO()
        np.save(meta_array, np.frombuffer(json.dumps(meta).encode(), np.uint8))
        archive.writestr("__meta__.npy", meta_array.getvalue())
    with pytest.raises(CheckpointError, match="declares float64\\[1099511627776\\], more than it holds"):
        load_checkpoint(path, run_id="r1", party="bank")


def test_readers_name_the_file_and_the_problem(tmp_path):
    from vsplit.config.load import load_config
    from vsplit.data.sources import read_table

    (tmp_path / "party.toml").write_bytes(b'[party]\nname = "\xd9bank"\n')
    with pytest.raises(ConfigError, match=r"party\.toml: not UTF-8"):
        load_config(tmp_path / "party.toml", check_files=False)
    (tmp_path / "t.parquet").write_bytes(b"PAR1" + bytes(64) + b"PAR1")
    with pytest.raises(DataError, match=r"t\.parquet: cannot be read as Parquet"):
        read_table(tmp_path / "t.parquet", id_column="customer_id")
