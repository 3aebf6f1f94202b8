"""Files at rest (issue 45): what a run writes is created 0600 whatever the umask, a write never follows a link
planted in a run folder, and a ``model.npz`` whose zip entries overlap or declare more than the file holds is
refused before anything is allocated.

One small in-process run (a bank and a partner joined by in-memory channels, 400 customers, one epoch) trains,
scores, explains, monitors and cuts the search's rows under each umask; every file it leaves must be 0600.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import threading
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from _pilot_support import small

from vsplit.atomic import write_atomic
from vsplit.config import load_config
from vsplit.datasets import preset
from vsplit.errors import ConfigError, UnreadableCheckpoint
from vsplit.npy_files import read_npz
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.prepare import export_tables
from vsplit.runtime.checkpoint import load_checkpoint, save_checkpoint
from vsplit.transport.memory import memory_pair

PARTIES = ("bank", "partner")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("parties")
    data = small(preset("secretflow_bank"), 400, 120)
    write_missing_configs(root, label=data.label, positive_label=data.positive_label)
    export_tables(data, root)
    return root


def _configs(root: Path, run_id: str) -> dict:
    return {p: load_config(root / p / "party.toml", overrides=[f"output.run_id={run_id}", "train.epochs=1"],
                           check_files=False) for p in PARTIES}


def _pair(bank, partner) -> None:
    """``bank(channels)`` here and ``partner(channels)`` in a thread, joined by an in-memory channel."""
    bank_end, partner_end = memory_pair()
    failed: list[BaseException] = []

    def side() -> None:
        try:
            partner({"bank": partner_end})
        except BaseException as exc:  # re-raised below, in the test's thread
            failed.append(exc)

    worker = threading.Thread(target=side)
    worker.start()
    bank({"partner": bank_end})
    worker.join(timeout=120)
    if failed:
        raise failed[0]


@contextlib.contextmanager
def _umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize("mask", [0o022, 0o077], ids=["umask-022", "umask-077"])
def test_every_file_a_small_run_writes_is_created_0600_whatever_the_umask(root, mask):
    from vsplit.cli.logs import log_to_run_folder
    from vsplit.explain.process import explain_party
    from vsplit.monitor.process import monitor_party
    from vsplit.node import PartyNode
    from vsplit.tune.study import open_study
    from vsplit.tune.trial import split_rows, tune_folder

    configs = _configs(root, f"umask-{mask:03o}")
    tables = {p: root / p / "data" / "test.parquet" for p in PARTIES}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with _umask(mask):
            nodes = {p: PartyNode(c, progress=False) for p, c in configs.items()}
            with log_to_run_folder(nodes["bank"].folder):
                _pair(nodes["bank"].run, nodes["partner"].run)
            scorers = {p: PartyNode(c, progress=False) for p, c in configs.items()}
            _pair(lambda ch: scorers["bank"].predict(tables["bank"], channels=ch),
                  lambda ch: scorers["partner"].predict(tables["partner"], channels=ch))
            _pair(lambda ch: explain_party(configs["bank"], tables["bank"], job="why", channels=ch),
                  lambda ch: explain_party(configs["partner"], tables["partner"], job="why", channels=ch))
            for party in PARTIES:
                monitor_party(configs[party], tables[party], job="drift")
            split_rows(configs["bank"])
            open_study(storage=tune_folder(configs["bank"]) / "study.log", name="s", seed=0)
    finally:
        torch.set_num_threads(threads)
    run = nodes["bank"].folder.parent
    modes = {p.relative_to(run).as_posix(): p.stat().st_mode & 0o777 for p in run.rglob("*") if p.is_file()}
    names = {Path(name).name for name in modes}
    # the row-bearing outputs are all there: labels, predictions, explanations, attributions, IDs
    assert {"model.npz", "predictions.csv", "explanations.csv", "reasons.csv", "attributions.csv", "stability.csv",
            "fit.parquet", "valid.parquet", "study.log", "result.json", "log.txt"} <= names, sorted(names)
    assert {name: oct(mode) for name, mode in modes.items() if mode != 0o600} == {}


def test_a_link_planted_as_a_run_output_is_refused_and_its_target_untouched(root, tmp_path):
    from vsplit.tune.trial import split_rows, tune_folder

    config = _configs(root, "planted-file")["bank"]
    target = tmp_path / "elsewhere.parquet"
    target.write_bytes(b"not yours")
    rows = tune_folder(config) / "rows"
    rows.mkdir(parents=True)
    (rows / "fit.parquet").symlink_to(target)
    with pytest.raises(ConfigError, match=r"fit\.parquet is a symbolic link \(to .*elsewhere\.parquet\).*remove"):
        split_rows(config)
    assert target.read_bytes() == b"not yours"
    assert (rows / "fit.parquet").is_symlink()


def test_a_linked_subfolder_of_a_run_folder_is_not_written_into(root, tmp_path):
    from vsplit.node import PartyNode
    from vsplit.node.outputs import write_predictions
    from vsplit.tune.trial import split_rows, tune_folder

    config = _configs(root, "planted-folder")["bank"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    party = tune_folder(config).parent
    party.mkdir(parents=True)
    (party / "tune").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"/tune is a symbolic link .*run again"):
        split_rows(config)
    (party / "predictions").symlink_to(elsewhere, target_is_directory=True)
    folder = PartyNode(config, progress=False).folder / "predictions" / "job"
    with pytest.raises(ConfigError, match=r"/predictions is a symbolic link"):
        write_predictions(folder, id_column="id", own=["a"], wanted=None, by_id={"a": 0.5}, missing="-", me="bank",
                          within=party)
    (party / "checkpoints").symlink_to(elsewhere, target_is_directory=True)  # a node's writes are all confined
    with pytest.raises(ConfigError, match=r"/checkpoints is a symbolic link"):
        save_checkpoint(party / "checkpoints" / "epoch-0000.npz", {"epoch": 0}, run_id="r", party="bank")
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(ConfigError, match="outside the run folder"):
        write_atomic(tmp_path / "x.csv", b"id", within=party)


def _stacked_npz(path: Path, *, entries: int, payload: int) -> None:
    """A ``.npz`` of ``entries`` stored ``.npy`` entries, each one's data running on through every later entry's
    headers to the shared payload's end: each entry on its own is well formed and no bigger than the file, together
    they declare ``entries`` times the file (a zip bomb without compression)."""
    from numpy.lib import format as npy

    def header(n: int) -> bytes:
        out = io.BytesIO()
        npy.write_array_header_1_0(out, {"descr": "|u1", "fortran_order": False, "shape": (n,)})
        return out.getvalue()

    names = [f"a{i:04d}.npy".encode() for i in range(entries)]
    tail, records = b"\0" * payload, []
    for name in reversed(names):  # built back to front: each entry's data holds every later entry
        head = header(len(tail))
        data = head + tail
        crc = zlib.crc32(data)
        local = struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0x21, crc, len(data), len(data),
                            len(name), 0) + name
        records.append((name, crc, len(data), len(local) + len(head)))
        tail = local + data
    offset, central = 0, b""
    for name, crc, size, step in reversed(records):
        central += struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, 20, 0, 0, 0, 0, 0x21, crc, size, size,
                               len(name), 0, 0, 0, 0, 0, offset) + name
        offset += step
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, entries, entries, len(central), len(tail), 0)
    path.write_bytes(tail + central + end)


def _peak(call) -> tuple[BaseException | None, int]:
    """What ``call()`` raised (or None) and the most memory it held at once, in bytes."""
    tracemalloc.start()
    try:
        call()
        raised = None
    except Exception as exc:
        raised = exc
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, peak


def test_a_model_npz_of_overlapping_entries_is_refused_before_allocating_them(tmp_path):
    path = tmp_path / "model.npz"
    _stacked_npz(path, entries=200, payload=256_000)  # 0.3 MB declaring 55 MB of arrays
    size = path.stat().st_size
    raised, peak = _peak(lambda: load_checkpoint(path, run_id="r", party="bank"))
    assert isinstance(raised, UnreadableCheckpoint)
    assert str(path) in str(raised) and "overlaps entry" in str(raised)
    assert peak < 2 * size, f"held {peak} bytes reading a {size}-byte file"
    with pytest.raises(ValueError, match=r"entry 'a0001\.npy' overlaps entry 'a0000\.npy'"):
        read_npz(path)


def _savez(**arrays) -> tuple[bytearray, int]:
    """An ``np.savez`` file's bytes and the offset of its last entry's central directory record."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    raw = bytearray(buffer.getvalue())
    return raw, raw.rindex(b"PK\x01\x02")


@pytest.mark.parametrize(("stored", "declared"), [(0, 4096), (200, 200)],
                         ids=["declares-more-than-it-stores", "runs-into-the-directory"])
def test_a_model_npz_entry_declaring_more_than_the_file_holds_is_refused(tmp_path, stored, declared):
    raw, record = _savez(w=np.arange(1000, dtype=np.float64), b=np.zeros(10))
    compressed, size = struct.unpack_from("<2L", raw, record + 20)
    struct.pack_into("<2L", raw, record + 20, compressed + stored, size + declared)  # b.npy's sizes
    path = tmp_path / "model.npz"
    path.write_bytes(bytes(raw))
    assert size + declared < len(raw)  # no bigger than the file: what was checked before
    with pytest.raises(ValueError, match=r"entry 'b\.npy' declares (more bytes than the file holds|\d+ bytes but)"):
        read_npz(path)


def test_benign_model_files_still_load(tmp_path):
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "empty": np.zeros(0), "scalar": np.array(7),
              "mask": np.array([True, False]), "f": np.asfortranarray(np.ones((2, 3)))}
    raw, _ = _savez(**arrays)
    path = tmp_path / "plain.npz"
    path.write_bytes(bytes(raw))
    loaded = read_npz(path)
    assert loaded.keys() == arrays.keys()
    for name, value in arrays.items():
        np.testing.assert_array_equal(loaded[name], value)
        assert loaded[name].dtype == value.dtype
    state = {"model": {"weight": torch.randn(4, 3), "bias": torch.zeros(3)}, "epoch": 2}
    save_checkpoint(tmp_path / "model.npz", state, run_id="r", party="bank")
    back = load_checkpoint(tmp_path / "model.npz", run_id="r", party="bank")
    assert torch.equal(back["model"]["weight"], state["model"]["weight"]) and back["epoch"] == 2
