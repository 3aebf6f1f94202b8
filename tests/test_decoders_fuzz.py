"""Every decoder of untrusted bytes, fuzzed: whatever a peer sends or a file holds, reading it returns something valid
or raises one of vsplit's own errors, allocates no more than the input, and ends quickly.

The targets (benchmarks/fuzzing/targets.py) are the ones `make fuzz` runs under Atheris; here Hypothesis mutates
their seed corpus and forges frames field by field, a few hundred examples each (seconds in all).
"""

from __future__ import annotations

import json
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
WIRE = ["psi_messages", "secagg_messages", "horizontal_messages", "sealed_frames", "training_messages",
        "serve_messages", "serve_snapshots", "tune_messages", "explain_messages"]


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


#: text fields an attacker picks: names, and JSON (tune values and scores) at the edges of what Python parses
STRINGS = [b"", b"bank", b"a\nb", b"\xff", b"w/x\nw/x", b'{"lr": 0.001}', b'{"lr": ' + b"9" * 400 + b"}",
           b'{"lr": 1e999}', b"[" * 3000, b'{"x": 1}', b'{"1": 0.9, "a": 0.5}', b'{"dropout": true}', b"NaN"]


@st.composite
def forged_frames(draw) -> bytes:
    """A valid header for a real message type, then attacker-chosen scalars, array descriptors and bytes."""
    family = draw(st.sampled_from(["psi", "secagg", "horizontal", "training", "sealed", "serve", "tune", "explain"]))
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
    strings = b"".join(struct.pack("<I", len(s)) + s for s in (draw(st.sampled_from(STRINGS)) for _ in layout.strings))
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
    with pytest.raises(CheckpointError, match="declares float64\\[1099511627776\\], more than the 8 bytes it holds"):
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


# -- what fuzzing the services found, each a clear error now ----------------------------------------------------------
@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_a_scoring_request_nested_too_deeply_or_with_an_oversized_number_is_refused_with_its_field(parser,
                                                                                                  monkeypatch):
    """With orjson (the serve extra) and with the standard library's parser it falls back to."""
    from vsplit.serve import requests
    from vsplit.serve.requests import BadRequest, parse_body, parse_row

    if parser == "json":
        monkeypatch.setattr(requests, "orjson", None)
    elif requests.orjson is None:
        pytest.skip("orjson is not installed (pip install 'vsplit[serve]')")
    deep = "nested too deeply" if parser == "json" else "depth limit exceeded"
    with pytest.raises(BadRequest, match=f"malformed JSON.*{deep}") as nested:  # was a RecursionError (HTTP 500)
        parse_body(b"[" * 5000, max_bytes=64 * 1024)
    assert nested.value.status == 400
    huge = "Exceeds the limit" if parser == "json" else "number is infinity"
    with pytest.raises(BadRequest, match=f"malformed JSON.*{huge}"):  # was a ValueError
        parse_body(b'{"id": ' + b"9" * 5000 + b"}", max_bytes=64 * 1024)
    row = {"id": "1", "features": {"age": 10**400}}  # was an OverflowError in math.isfinite
    with pytest.raises(BadRequest, match=r"features\.age: expected a finite number"):
        parse_row(row, columns={"age": "numeric"}, nulls=False)


def test_tune_messages_with_oversized_numbers_deep_nesting_or_unreadable_scores_are_protocol_errors():
    from vsplit.tune.messages import TuneEnd, TuneProposal, decode_values

    with pytest.raises(ProtocolError, match="lr = a huge integer is not a finite number"):  # was an OverflowError
        decode_values('{"lr": ' + "9" * 400 + "}")
    with pytest.raises(ProtocolError, match="nested too deeply"):  # was a RecursionError
        TuneProposal(number=1, values="[" * 3000)
    with pytest.raises(ProtocolError, match="numeric_embedding = \\['none'\\] is not one of its choices"):
        decode_values('{"numeric_embedding": ["none"]}')
    with pytest.raises(ProtocolError, match="scores: an object of trial number -> AUC"):  # all_scores() raised
        TuneEnd(best=-1, values="", auc=0.0, scores='{"a": 0.5}')
    assert TuneEnd(best=-1, values="", auc=0.0, scores='{"3": 0.5}').all_scores() == {3: 0.5}


def test_a_damaged_study_journal_is_a_config_error_naming_it_and_a_torn_last_line_is_cut(tmp_path):
    from vsplit.tune.study import open_study

    path = tmp_path / "study.log"
    study = open_study(storage=path, name="s", seed=0)
    trial = study.ask()
    trial.suggest_float("lr", 1e-4, 1e-2, log=True)
    study.tell(trial, 0.8)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"op_code": 4, "worker')  # stopped while appending: the line is cut, the rest kept
    assert len(open_study(storage=path, name="s", seed=0).trials) == 1
    kept = path.read_bytes()
    assert kept.startswith(whole)  # and after it only whole lines Optuna appended
    assert all(json.loads(line) for line in kept[len(whole):].splitlines())
    path.write_bytes(b"\x80" + whole[1:])  # was a UnicodeDecodeError, or JSON and assertion errors, from Optuna
    with pytest.raises(ConfigError, match=r"study\.log: the study journal cannot be read .*move it away"):
        open_study(storage=path, name="s", seed=0)


def test_a_damaged_calibration_file_is_a_config_error_naming_it(tmp_path):
    from vsplit.explain.calibration import Calibrator

    path = tmp_path / "calibration.json"
    for text, problem in [(b"[1, 2]", "expected a JSON object"), (b"\xff", "not a calibration file"),
                          (b'{"method": "isotonic", "x": 5, "y": []}', "x: expected a list"),
                          (b'{"method": "temperature", "temperature": "2"}', "temperature: expected a number"),
                          (b'{"method": "isotonic", "x": [0.1, NaN], "y": [0, 1]}', "finite x and y")]:
        path.write_bytes(text)  # each was an AttributeError, UnicodeDecodeError, TypeError or ValueError
        with pytest.raises(ConfigError, match=problem) as error:
            Calibrator.load(path)
        assert str(path) in str(error.value)


def test_monitor_refuses_scores_that_are_not_a_csv_or_not_probabilities(tmp_path):
    from vsplit.monitor.process import read_scores

    path = tmp_path / "predictions.csv"
    for text, problem in [(b"", "cannot be read as CSV"), (b"probability\n\xff\xfe\n", "cannot be read as CSV"),
                          (b"id,probability\n1,0.5\n2,abc\n", "holds 'abc', not a probability \\(data row 2\\)"),
                          (b"id,probability\n1,1.5\n", "holds '1.5'")]:
        path.write_bytes(text)  # was an EmptyDataError, a UnicodeDecodeError, a ValueError, or a PSI of 1.5
        with pytest.raises(DataError, match=problem):
            read_scores(path)
    path.write_bytes(b"id,probability,status\n1,0.25,scored\n2,,unknown\n")
    assert read_scores(path).tolist() == [0.25]


def test_a_snapshot_is_taken_only_signed_by_the_partner_with_the_expected_width():
    from fuzzing.services import WIDTH, identity, run_snapshot, snapshot_seeds

    from vsplit.serve.messages import Snapshot
    from vsplit.serve.snapshots import check_snapshot

    cert, _ = identity()
    _, good = codec.decode(bytearray(snapshot_seeds()[0]))
    assert check_snapshot(good, cert=cert, width=WIDTH) and not check_snapshot(good, cert=cert, width=WIDTH + 1)
    forged = Snapshot(**{**{f: getattr(good, f) for f in good.__dataclass_fields__},
                         "signature": np.frombuffer(b"\x30\x06\x02\x01\x01\x02\x01\x01", np.uint8)})
    assert not check_snapshot(forged, cert=cert, width=WIDTH)
    run_snapshot(snapshot_seeds()[1])  # a delta merged into the held table


# -- files a party reads back from its own run folder ------------------------------------------------------------------
def test_a_model_whose_contents_do_not_fit_is_refused_naming_the_file(tmp_path):
    """A model.npz of the right format whose preprocessing or tensors do not fit the party (fuzzing found a missing
    scaler, renamed categories and mis-shaped quantiles getting through to a traceback at prediction)."""
    from fuzzing import files

    from vsplit.errors import UnreadableCheckpoint

    tree = json.loads(files.model_seeds()[0])  # dicts are stored as [key, value] pairs under "__dict__"
    for damage in ("no scaler", "renamed category", "quantiles", "tensor"):
        bad = json.loads(json.dumps(tree))
        pairs = dict(bad["tree"]["__dict__"])
        prep = dict(pairs["preprocessor"]["__dict__"])
        if damage == "no scaler":
            prep["scaler"] = {"__dict__": []}
        elif damage == "renamed category":
            prep["categories"]["__dict__"][0][0] = "j0b"
        elif damage == "quantiles":
            scaler = dict(prep["scaler"]["__dict__"])
            scaler["quantiles"], scaler["references"] = scaler["references"], scaler["quantiles"]
            prep["scaler"] = {"__dict__": [[k, v] for k, v in scaler.items()]}
        else:
            segments = dict(pairs["segments"]["__dict__"])
            first = segments["bank"]["__dict__"]
            first[0][1], first[1][1] = first[1][1], first[0][1]  # two tensors swapped: shapes no longer fit
        pairs["preprocessor"] = {"__dict__": [[k, v] for k, v in prep.items()]}
        bad["tree"] = {"__dict__": [[k, v] for k, v in pairs.items()]}
        with pytest.raises(UnreadableCheckpoint, match=r"model\.npz does not hold what this party's model needs"):
            files.run_model(json.dumps(bad).encode())


def test_a_damaged_model_card_record_names_the_file_and_the_section(tmp_path):
    from vsplit.report.card_record import read_card

    path = tmp_path / "model_card.json"
    for text, problem in [('{"metrics": {"level": 1e400}}', "metrics.level must be a number"),
                          ('{"data": "x"}', "data must be an object"),
                          ('{"fairness": {"column": "age"}}', "fairness needs both column and slices"),
                          ('{"metrics": {"curve": {"mean_predicted": [0.1], "observed_rate": []}}}', "metrics.curve"),
                          ('{"limits": "one"', "not a readable model card"),
                          ("[1]", "a model card is a JSON object, this holds list")]:
        path.write_text(text)
        with pytest.raises(DataError, match=f"model_card.json: {problem}"):
            read_card(path)


def test_a_token_file_holds_one_line_of_printable_ascii(tmp_path):
    from fuzzing.files import run_token

    run_token(b"\n\n  q3Zs0c1Yq8c5hA2fL0nJ9w4Rr7tUe6Xk \nignored second line\n")
    for data, problem in [(b"\xff" * 20, "not UTF-8"), (b"q3Zs0c1Y q8c5hA2fL0nJ9w4Rr7", "a space, a control"),
                          ("q3Zs0c1Yq8c5hA2fL0nJ9w4Rr7é".encode(), "non-ASCII"), (b"x" * 5000, "holds 5000 bytes")]:
        with pytest.raises(ConfigError, match=problem):
            run_token(data)


def test_damaged_psi_progress_names_the_folder_to_delete(tmp_path):
    from fuzzing.files import psi_state_seeds, run_psi_layout, run_psi_state

    state = json.loads(psi_state_seeds()[1])
    for key, value in [("salt", "zz"), ("done", 7), ("done", "1"), ("peer_total", -8)]:
        with pytest.raises(DataError, match=f"state.json is damaged \\({key} not as written\\)"):
            run_psi_state(json.dumps({**state, key: value}).encode())
    run_psi_state(b'{"fingerprint": {"other": 1}}')  # another run's settings: ignored, as before
    with pytest.raises(DataError, match=r"layout-0000\.npy \(unreadable array header"):  # was a TokenError
        run_psi_layout(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<i8',\n")
