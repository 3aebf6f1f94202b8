"""One fuzz target per decoder of untrusted bytes: every message family a peer sends, and every file format read
from disk. Shared by the Hypothesis properties (tests/test_decoders_fuzz.py) and the Atheris runs (benchmarks/fuzz.py).

A target takes bytes and either returns (the input decoded to something valid) or raises one of vsplit's own errors
(:class:`vsplit.errors.VsplitError`): anything else is a crash. The wire targets go through the same decoder a party
runs on a received frame (:func:`vsplit.transport.codec.decode`, or secure aggregation's size-capped
:func:`~vsplit.federated.secagg_messages.decode_frame`), then through what a receiver does next with the message's
payload (a state's named tensors, a compressed tensor's values, a sealed hand-off's inner frame). The file targets
write the bytes to a file of the right name and read it with the project's reader.

Example:
    >>> sorted(TARGETS)[:3]
    ['calibration_file', 'checkpoint_file', 'config_file']
    >>> TARGETS["stream_frames"].run(TARGETS["stream_frames"].seeds()[0])
"""

from __future__ import annotations

import hashlib
import io
import random
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vsplit.errors import ProtocolError, VsplitError
from vsplit.protocol.message import Message, fields_of
from vsplit.transport import codec

#: the biggest input any target reads: the transport's frame cap is 64 MiB, but the fuzzers' inputs are small
MAX_INPUT = 1 << 20
SESSION = b"fuzz-session-id!"


@dataclass(frozen=True)
class Target:
    """A decoder under fuzzing: ``run(data)`` decodes; ``seeds()`` gives valid inputs to start from."""

    name: str
    run: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    about: str


def expected(exc: BaseException) -> bool:
    """Whether a target may raise ``exc``: only vsplit's own errors."""
    return isinstance(exc, VsplitError)


# -- wire messages ---------------------------------------------------------------------------------------------------
def _families() -> dict[str, tuple[type[Message], ...]]:
    from vsplit.explain import messages as explain
    from vsplit.federated import secagg_messages
    from vsplit.horizontal import join, messages, predict, readmit
    from vsplit.protocol import abort
    from vsplit.protocol.training import messages as training
    from vsplit.psi import messages as psi
    from vsplit.serve import messages as serve
    from vsplit.tune import messages as tune

    def of(*modules) -> tuple[type[Message], ...]:
        found = []
        for module in modules:
            for value in vars(module).values():
                if isinstance(value, type) and issubclass(value, Message) and value.type_code > 0:
                    found.append(value)
        return tuple(dict.fromkeys(found))

    return {
        "psi": of(psi, abort),
        "secagg": secagg_messages.MESSAGES,
        "horizontal": tuple(c for c in of(messages, join, predict, readmit) if c.__name__ != "SealedState"),
        "training": of(training),
        "sealed": (messages.SealedState,),
        "serve": of(serve),
        "tune": of(tune),
        "explain": of(explain),
    }


def _plausible(cls: type[Message], rng: random.Random) -> bytearray:
    """A frame of message type ``cls`` with random but plausible fields (small counts, common dtypes and shapes):
    many pass the message's own checks, which is what a seed corpus needs."""
    layout = codec.layout_of(cls)
    numbers: list[object] = []
    for _, kind in fields_of(cls):
        if kind is int:
            numbers.append(rng.choice([0, 0, 1, 2, 3, 8, 32]))
        elif kind is float:
            numbers.append(rng.choice([0.0, 0.5, 1.0]))
        elif kind is bool:
            numbers.append(rng.choice([0, 1]))
    for _ in layout.arrays:
        dtype = rng.choice(["uint8", "float32", "int64", "float64", "uint16", "int8", "uint32"])
        shape = rng.choice([(0,), (1,), (4,), (32,), (1, 32), (2, 32), (2, 4), (3,), (9,)])
        numbers += [list(codec.DTYPES).index(dtype), len(shape), *shape, *(0,) * (codec.MAX_NDIM - len(shape))]
    strings = [rng.choice(["", "bank", "partner", "a", "w/bottom/weight", "0" * 64]) for _ in layout.strings]
    arrays = b""
    for i, _ in enumerate(layout.arrays):
        pos = len(layout.numbers) + i * (2 + codec.MAX_NDIM)
        dtype = list(codec.DTYPES.values())[numbers[pos]]  # type: ignore[index]
        count = int(np.prod(numbers[pos + 2 : pos + 2 + numbers[pos + 1]]))  # type: ignore[operator,index]
        arrays += bytes(rng.getrandbits(8) & 0x3F for _ in range(count * dtype.itemsize))
    meta = layout.fixed_in.pack(*numbers) + b"".join(struct.pack("<I", len(s)) + s.encode() for s in strings)
    header = codec.HEADER.pack(codec.MAGIC, codec.WIRE_VERSION, 0, cls.type_code, 0, SESSION, 1, len(meta))
    return bytearray(header + meta + arrays)


def _message_seeds(family: str, *, per_class: int = 2, tries: int = 400) -> list[bytes]:
    """Frames of every message type of ``family`` that decode (found among plausible ones, seeded), and one that
    does not for a type none of whose tries decoded."""
    rng = random.Random(f"vsplit-fuzz-{family}")
    seeds: list[bytes] = []
    for cls in _families()[family]:
        found, last = [], b""
        for _ in range(tries):
            frame = _plausible(cls, rng)
            last = bytes(frame)
            try:
                codec.decode(frame)
            except VsplitError:
                continue
            found.append(last)
            if len(found) >= per_class:
                break
        seeds += found or [last]
    return seeds


def _wire(family: str, then: Callable[[Message], None] | None = None) -> Callable[[bytes], None]:
    classes: tuple[type[Message], ...] = ()

    def run(data: bytes) -> None:
        nonlocal classes
        classes = classes or _families()[family]
        if len(data) > MAX_INPUT:
            raise ProtocolError("input over the fuzzing cap")
        _, msg = codec.decode(bytearray(data))
        if type(msg) not in classes:
            raise ProtocolError(f"{type(msg).__name__} is not a {family} message")
        if then is not None:
            then(msg)

    return run


def _secagg(data: bytes) -> None:
    from vsplit.federated.secagg_messages import decode_frame

    decode_frame(bytearray(data), length=8, clients=4)


def _secagg_seeds() -> list[bytes]:
    return _message_seeds("secagg", tries=2000)


def _state_tensors(msg: Message) -> None:
    from vsplit.horizontal.messages import SegmentState

    if isinstance(msg, SegmentState):
        msg.arrays()


def _training_values(msg: Message) -> None:
    from vsplit.protocol.training.compression import shape_of, values_of

    try:
        shape = shape_of(msg)
    except TypeError:  # a message without a tensor
        return
    if int(np.prod(shape)) > MAX_INPUT:  # what a receiver checks against its plan before decoding
        raise ProtocolError(f"tensor of shape {shape} is not the planned one")
    values_of(msg)


def _hello(data: bytes) -> None:
    from vsplit.transport.tls import parse_hello

    parse_hello(data, who="peer")


def _hello_seeds() -> list[bytes]:
    from vsplit.transport.tls import hello

    return [hello("bank", "partner"), hello("insurer", "bank", ok=False)]


# -- the stream's framing ---------------------------------------------------------------------------------------------
_STREAM_CAP = 4096


class _Pieces:
    """A record layer's reading side over bytes that arrive in pieces of ``step`` bytes (one piece per readable
    socket, as TCP and TLS records could cut a stream)."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._step, self._left = memoryview(data), step, 0

    def next_piece(self) -> bool:
        self._left = min(self._step, len(self._data))
        return bool(self._left)

    def buffered(self) -> bool:
        return False

    def read_into(self, room: memoryview) -> int | None:
        n = min(len(room), self._left)
        if not n:
            return None
        room[:n], self._data = self._data[:n], self._data[n:]
        self._left -= n
        return n


def _stream(data: bytes) -> None:
    """The plaintext a peer's stream carries, cut into frames the way a channel reads it
    (:func:`vsplit.transport.stream.open_frames`: the record layer writes into the :class:`Deframer`'s buffer), in
    pieces of ``data[0] + 1`` bytes, as TCP and TLS records could cut it; frames are capped at 4 KiB."""
    from vsplit.transport.framing import Deframer
    from vsplit.transport.stream import open_frames

    if not data:
        return
    layer, deframer = _Pieces(data[1:], data[0] + 1), Deframer(max_frame=_STREAM_CAP)
    while layer.next_piece():
        frames: list[bytearray] = []
        open_frames(layer, deframer, frames)
        for frame in frames:
            if not 0 < len(frame) <= _STREAM_CAP:
                raise AssertionError(f"a frame of {len(frame)} bytes came out of a stream capped at {_STREAM_CAP}")
    if deframer.buffered > _STREAM_CAP:
        raise AssertionError(f"{deframer.buffered} bytes buffered for a frame capped at {_STREAM_CAP}")


def _stream_seeds() -> list[bytes]:
    from vsplit.transport.framing import HEARTBEAT, prefix

    frames = [b"x", bytes(range(256)) * 3, b"\x00" * _STREAM_CAP]
    stream = b"".join(prefix(f) + f + HEARTBEAT for f in frames)
    return [bytes([0]) + stream, bytes([6]) + stream, bytes([255]) + stream, bytes([3]) + prefix(10) + b"short"]


# -- the resumable channel's envelopes -------------------------------------------------------------------------------
def _envelopes(data: bytes) -> None:
    """A run of envelopes (each behind a one-byte length) into the bookkeeping a resumable channel's receiver runs on
    them (:mod:`vsplit.transport.numbered`): acks against a resend buffer holding five sent frames, DATA and GOODBYE
    numbers into the in-order acceptor, a RESUME into the resend buffer's resume."""
    from vsplit.transport import numbered

    out, inbound = numbered.Outbox(limit=1 << 16), numbered.Inbound()
    for _ in range(5):
        out.add(lambda seq: numbered.data_head(seq, 0), b"payload")
    at = 0
    while at < len(data):
        size = data[at]
        env = numbered.parse(data[at + 1 : at + 1 + size])
        at += 1 + size
        if env.kind == numbered.RESUME:
            out.resume(env.seq)
            continue
        out.acknowledge(env.ack)
        if env.kind != numbered.ACK:
            inbound.accept(env.seq)


def _envelope_seeds() -> list[bytes]:
    from vsplit.transport import numbered

    def run(*envelopes: bytes) -> bytes:
        return b"".join(bytes([len(e)]) + e for e in envelopes)

    return [run(numbered.data(0, 2, b"frame"), numbered.data(1, 3, b"x"), numbered.ack(5), numbered.goodbye(2, 5)),
            run(numbered.resume(b"t" * numbered.TOKEN_BYTES, 3), numbered.data(0, 4, b"again"),
                numbered.data(0, 4, b"x"))]


# -- sealed hand-offs ------------------------------------------------------------------------------------------------
def _keys():
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    a = X25519PrivateKey.from_private_bytes(hashlib.sha256(b"fuzz-a").digest())
    b = X25519PrivateKey.from_private_bytes(hashlib.sha256(b"fuzz-b").digest())
    return a, b


def _seal_bytes(plaintext: bytes, round_: int):
    """A sealed box around any plaintext, made as :func:`vsplit.horizontal.sealed.seal` makes one: what an
    authenticated but hostile client could send, so that fuzzing reaches past the cipher to the inner decoder."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from vsplit.horizontal import sealed
    from vsplit.horizontal.messages import SealedState

    a, b = _keys()
    ephemeral = a  # fixed, so that runs repeat; seal() draws a fresh one
    eph_public = sealed.public_bytes(ephemeral)
    aad = sealed._aad("a", "b", round_, b"fuzz")
    recipient = sealed.public_bytes(b)
    secret = sealed._key(sealed._exchange(a, recipient), sealed._exchange(ephemeral, recipient), aad + eph_public)
    nonce = bytes(12)
    box = AESGCM(secret).encrypt(nonce, plaintext, aad)
    return SealedState(round=round_, sender="a", recipient="b", ephemeral=sealed._array(eph_public),
                       nonce=sealed._array(nonce), ciphertext=sealed._array(box))


def _sealed(data: bytes) -> None:
    """The first byte picks the round; the rest is the plaintext of a box that opens."""
    from vsplit.horizontal import sealed

    a, b = _keys()
    round_ = data[0] if data else 0
    box = _seal_bytes(data[1:], round_)
    sealed.open_sealed(box, key=b, sender_public=sealed.public_bytes(a), context=b"fuzz")


def _sealed_seeds() -> list[bytes]:
    from vsplit.horizontal.messages import SegmentState

    state = SegmentState.pack(round=2, rows=5, arrays={"w/x": np.ones((2, 3), np.float32), "b/n": np.arange(2)})
    inner = bytes(codec.encode(state, session=bytes(codec.SESSION_BYTES), seq=0))
    return [bytes([2]) + inner, bytes([0]) + inner]


def _sealed_frame_seeds() -> list[bytes]:
    return [bytes(codec.encode(_seal_bytes(seed[1:], seed[0]), session=SESSION, seq=3)) for seed in _sealed_seeds()]


# -- files -----------------------------------------------------------------------------------------------------------
_FOLDER: list[Path] = []


def _in_file(name: str, data: bytes, read: Callable[[Path], object]) -> None:
    """Write ``data`` to a file called ``name`` (in one temporary folder per process) and ``read`` it."""
    if not _FOLDER:
        holder = tempfile.TemporaryDirectory(prefix="vsplit-fuzz-")
        _FOLDER.append(Path(holder.name))
        _FOLDER_HOLDER.append(holder)  # removed when the process ends
    path = _FOLDER[0] / name
    path.write_bytes(data)
    try:
        read(path)
    finally:
        path.unlink(missing_ok=True)


_FOLDER_HOLDER: list[tempfile.TemporaryDirectory] = []


def _checkpoint(data: bytes) -> None:
    from vsplit.runtime.checkpoint import load_checkpoint

    _in_file("epoch-0001.npz", data, lambda p: load_checkpoint(p, run_id="r1", party="bank"))


def _checkpoint_seeds() -> list[bytes]:
    import torch

    from vsplit.runtime.checkpoint import save_checkpoint

    out = []
    with tempfile.TemporaryDirectory() as folder:
        for i, state in enumerate([
            {"epoch": 3, "w": torch.ones(2, 3), "opt": {"step": torch.tensor(4.0), "lr": [1e-3, (1, 2)]}},
            {"segments": {"bottom": {"weight": torch.zeros(2, 2, dtype=torch.float64)}}, "role": "label",
             "ids": np.arange(3), "name": None},
        ]):
            path = Path(folder) / f"c{i}.npz"
            save_checkpoint(path, state, run_id="r1", party="bank")
            out.append(path.read_bytes())
    return out


def _config(data: bytes) -> None:
    from vsplit.config.load import load_config

    def read(path: Path) -> None:
        load_config(path, check_files=False)

    _in_file("party.toml", data, read)


def _config_seeds() -> list[bytes]:
    root = Path(__file__).resolve().parents[2]
    found = sorted(root.glob("parties/**/*.toml"))[:6]
    return [p.read_bytes() for p in found] or [b'[party]\nname = "bank"\nrole = "label"\n']


def _table(suffix: str) -> Callable[[bytes], None]:
    def run(data: bytes) -> None:
        from vsplit.data.sources import read_table

        _in_file(f"table{suffix}", data, lambda p: read_table(p, id_column="customer_id", label=None))

    return run


def _csv_seeds() -> list[bytes]:
    return [
        b"customer_id,age,job,y\nC-1,30,admin.,no\nC-2,41,,yes\n",
        b"customer_id;age;balance\nC-1;30;1.5\nC-2;41;-2\n",
        b"customer_id,x\n\"C,1\",1e3\n",
    ]


def _parquet_seeds() -> list[bytes]:
    import pandas as pd

    out = []
    for frame in (pd.DataFrame({"customer_id": ["C-1", "C-2"], "age": [30, 41], "job": ["a", None]}),
                  pd.DataFrame({"customer_id": [1, 2, 3], "x": [0.5, float("nan"), 2.0]})):
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        out.append(buffer.getvalue())
    return out


def _file(name: str, read: Callable[[Path], None]) -> Callable[[bytes], None]:
    return lambda data: _in_file(name, data, read)


def _services() -> list[Target]:
    from fuzzing import services as s

    return [
        Target("serve_messages", s.run_serve_message, lambda: s.serve_seeds() + _message_seeds("serve"),
               "serving messages (vsplit.serve.messages), then what the bank or partner does with them (a snapshot's "
               "signature check and merge, a request's lookup)"),
        Target("serve_snapshots", s.run_snapshot, s.snapshot_seeds,
               "signed snapshots and deltas, signed again so that they verify: width and value checks, and the "
               "reload of the bank's cached partner table (vsplit.serve.snapshots, vsplit.serve.table)"),
        Target("serve_requests", s.run_request, s.request_seeds,
               "HTTP scoring request bodies (vsplit.serve.requests: parse_body, parse_row, parse_rows)"),
        Target("tune_messages", s.run_tune_message, lambda: s.tune_seeds() + _message_seeds("tune"),
               "tune messages (vsplit.tune.messages) into the round machines of the label party and a partner"),
        Target("tune_study_file", _file("study.log", s.run_study_file), s.study_seeds,
               "the study journal vsplit tune resumes (vsplit.tune.study.open_study) and its trials"),
        Target("explain_messages", _wire("explain"), lambda: s.explain_seeds() + _message_seeds("explain"),
               "joint explanation messages (vsplit.explain.messages) through the frame decoder"),
        Target("calibration_file", _file("calibration.json", s.run_calibration), s.calibration_seeds,
               "calibration.json (vsplit.explain.calibration.Calibrator.load), then applied"),
        Target("monitor_scores", _file("predictions.csv", s.run_scores), s.scores_seeds,
               "the predictions.csv files vsplit monitor compares (vsplit.monitor.process.read_scores)"),
        *_run_files(),
    ]


def _run_files() -> list[Target]:
    from fuzzing import files as f

    return [
        Target("model_contents", f.run_model, f.model_seeds,
               "the contents of model.npz (its JSON tree, with a real model's arrays): loaded as vsplit predict "
               "loads it (AlignedNode.load_model), then rows prepared and scored"),
        Target("model_card_record", f.run_card, f.card_seeds,
               "model_card.json read back by vsplit explain (vsplit.report.card_record.read_card), then rendered"),
        Target("serve_token_file", f.run_token, f.token_seeds,
               "the scoring service's serve.token_file (vsplit.serve.run.bearer_token)"),
        Target("psi_resume_state", f.run_psi_state, f.psi_state_seeds,
               "a pair's PSI progress, state.json (vsplit.psi.resume.PairState), as a rerun reads it"),
        Target("psi_resume_layout", f.run_psi_layout, f.psi_layout_seeds,
               "a finished PSI bucket's layout-KKKK.npy (vsplit.npy_files.read_npy_file), as a rerun restores it"),
    ]


def _build() -> dict[str, Target]:
    targets = [
        Target("psi_messages", _wire("psi"), lambda: _message_seeds("psi"),
               "PSI messages (vsplit.psi.messages, vsplit.protocol.abort) through the frame decoder"),
        Target("secagg_messages", _secagg, _secagg_seeds,
               "secure-aggregation frames through their size-capped decoder (secagg_messages.decode_frame)"),
        Target("horizontal_messages", _wire("horizontal", _state_tensors), lambda: _message_seeds("horizontal"),
               "horizontal messages (states, join, scoring, readmission) and a state's named tensors"),
        Target("tls_hello", _hello, _hello_seeds, "the hello a peer sends first inside mutual TLS (parse_hello)"),
        Target("stream_frames", _stream, _stream_seeds,
               "the stream's length-prefixed frames, cut in pieces, through open_frames into the Deframer's buffer"),
        Target("resume_envelopes", _envelopes, _envelope_seeds,
               "the resumable channel's envelopes (DATA, GOODBYE, ACK, RESUME) into its sans-IO bookkeeping "
               "(vsplit.transport.numbered: parse, the resend buffer, the in-order acceptor)"),
        Target("sealed_handoff", _sealed, _sealed_seeds,
               "the plaintext of a sealed hand-off that opens, through open_sealed (frame + state checks)"),
        Target("sealed_frames", _wire("sealed"), _sealed_frame_seeds, "the SealedState frame itself"),
        Target("training_messages", _wire("training", _training_values), lambda: _message_seeds("training"),
               "training messages and the values of plain, packed (float16, bfloat16, int8) and sparse tensors"),
        Target("checkpoint_file", _checkpoint, _checkpoint_seeds,
               "checkpoint and model files (.npz + JSON tree; the same reader loads model.npz)"),
        Target("config_file", _config, _config_seeds, "party configs (TOML), vsplit.config.load.load_config"),
        Target("csv_table", _table(".csv"), _csv_seeds, "CSV tables through vsplit.data.sources.read_table"),
        Target("parquet_table", _table(".parquet"), _parquet_seeds,
               "Parquet tables through vsplit.data.sources.read_table"),
        *_services(),
    ]
    return {t.name: t for t in targets}


TARGETS: dict[str, Target] = _build()


def corpus_dir(name: str) -> Path:
    """The seed corpus kept in the repository for target ``name``."""
    return Path(__file__).resolve().parent / "corpus" / name


def write_corpus() -> dict[str, int]:
    """(Re)write every target's seed corpus from its ``seeds()``; the files are named by their content's hash."""
    counts = {}
    for name, target in TARGETS.items():
        folder = corpus_dir(name)
        folder.mkdir(parents=True, exist_ok=True)
        for seed in target.seeds():
            (folder / hashlib.sha1(seed).hexdigest()[:16]).write_bytes(seed)
        counts[name] = len(list(folder.iterdir()))
    return counts


__all__ = ["MAX_INPUT", "TARGETS", "Target", "corpus_dir", "expected", "write_corpus"]
