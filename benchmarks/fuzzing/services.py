"""Fuzz targets of the services built on split training: online scoring (``vsplit serve``), the search between
organizations (``vsplit tune``), joint explanation (``vsplit explain``) and drift monitoring (``vsplit monitor``).

Each target goes as far as a receiver goes with the bytes: a serving frame through the codec and then what the bank or
the partner does with it (a snapshot's signature, width and values checked and merged into the cached embedding
table; a live request looked up in the partner's table); a tune frame through the codec and into the round machine of
the party it is meant for; an HTTP body through the checks run before scoring; a study journal, a ``calibration.json``
and a ``predictions.csv`` through the readers that load them. Shared with :mod:`fuzzing.targets` (which lists every
target) and tests/test_decoders_fuzz.py.

Example:
    >>> run_request(b'{"id": "42", "features": {"age": 41, "job": "admin.", "balance": 0}}')
    >>> run_request(b'[' * 5000)
    Traceback (most recent call last):
    ...
    vsplit.serve.requests.BadRequest: body: malformed JSON: nested too deeply; a request is an object of rows
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.transport import codec

SESSION = b"fuzz-session-id!"
#: the width of the partner's embeddings the fuzzed bank expects, and the rows of the table it already holds
WIDTH, HELD = 4, 6
#: the columns of the fuzzed scoring service's model
COLUMNS = {"age": "numeric", "job": "categorical", "balance": "numeric"}


# -- serving: the partner's signing identity, fixed so that a signed seed still verifies in another process ---------
_IDENTITY: list[tuple[Path, object]] = []
_HOLDER: list[tempfile.TemporaryDirectory] = []


def identity() -> tuple[Path, object]:
    """The fuzzed partner's certificate file and private key (P-256, derived from a fixed seed)."""
    if not _IDENTITY:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.derive_private_key(int.from_bytes(hashlib.sha256(b"vsplit-fuzz-partner").digest(), "big") >> 8,
                                    ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "partner")])
        start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(1).not_valid_before(start).not_valid_after(start + dt.timedelta(days=3650))
                .sign(key, hashes.SHA256()))
        holder = tempfile.TemporaryDirectory(prefix="vsplit-fuzz-serve-")
        _HOLDER.append(holder)  # removed when the process ends
        path = Path(holder.name) / "partner.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _IDENTITY.append((path, key))
    return _IDENTITY[0]


def _sign(digest: bytes) -> np.ndarray:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    _, key = identity()
    signature = key.sign(digest, ec.ECDSA(hashes.SHA256()))  # type: ignore[attr-defined]
    return np.frombuffer(signature, np.uint8).copy()


def _held():
    from vsplit.serve.messages import id_keys
    from vsplit.serve.table import EmbeddingTable

    keys = id_keys([str(i) for i in range(HELD)], run_id="v1")
    return EmbeddingTable.build(keys, np.arange(HELD * WIDTH, dtype=np.float32).reshape(HELD, WIDTH))


def _bank_takes(msg) -> None:
    """What the bank does with a message a partner sent: a snapshot is checked against the partner's certificate and
    the width of its embeddings, then merged into what the bank holds; a reply must answer the asked keys."""
    from vsplit.serve import messages as m
    from vsplit.serve.snapshots import check_snapshot, merge_snapshot

    if isinstance(msg, m.Snapshot):
        cert, _ = identity()
        if check_snapshot(msg, cert=cert, width=WIDTH):
            merge_snapshot(None if msg.full else _held(), [msg])
    elif isinstance(msg, m.EmbedRequest):  # what the partner does with the bank's request
        _held().lookup(msg.keys)


def run_serve_message(data: bytes) -> None:
    """A frame of any serving message, then what its receiver does with it."""
    from vsplit.serve import messages as m

    _, msg = codec.decode(bytearray(data))  # as the bank's and the partner's links (vsplit.serve.wire) decode
    if type(msg).__module__ != m.__name__:
        raise ProtocolError(f"{type(msg).__name__} is not a serving message")
    _bank_takes(msg)


def run_snapshot(data: bytes) -> None:
    """A snapshot frame, signed again by the partner's key whatever its signature field holds: what a partner with a
    valid key could send, so that fuzzing reaches past the signature to the width checks and the table merge."""
    from vsplit.serve import messages as m

    _, msg = codec.decode(bytearray(data))
    if not isinstance(msg, m.Snapshot):
        raise ProtocolError(f"{type(msg).__name__} is not a snapshot")
    digest = m.snapshot_digest(msg.run_id, msg.seq, msg.full, msg.part, msg.parts, msg.keys, msg.values, msg.removed)
    signed = m.Snapshot(run_id=msg.run_id, seq=msg.seq, full=msg.full, part=msg.part, parts=msg.parts, keys=msg.keys,
                        values=msg.values, removed=msg.removed, signature=_sign(digest))
    _bank_takes(signed)


def _frame(msg) -> bytes:
    return bytes(codec.encode(msg, session=SESSION, seq=1))


def _snapshot(*, full: bool, rows: range, removed: range = range(0), width: int = WIDTH) -> bytes:
    from vsplit.serve import messages as m

    keys = m.id_keys([str(i) for i in rows], run_id="v1")
    gone = m.id_keys([str(i) for i in removed], run_id="v1")
    values = np.full((len(rows), width), 0.5, np.float32)
    digest = m.snapshot_digest("v1", 3, full, 0, 1, keys, values, gone)
    return _frame(m.Snapshot(run_id="v1", seq=3, full=full, part=0, parts=1, keys=keys, values=values, removed=gone,
                             signature=_sign(digest)))


def snapshot_seeds() -> list[bytes]:
    return [_snapshot(full=True, rows=range(5)), _snapshot(full=False, rows=range(4, 9), removed=range(2)),
            _snapshot(full=True, rows=range(3), width=3)]


def serve_seeds() -> list[bytes]:
    from vsplit.serve import messages as m

    keys = m.id_keys(["1", "2", "99"], run_id="v1")
    return [
        _frame(m.ServeHello(party="partner", run_id="v1", digest=m.pair_digest("v1", "view"))),
        _frame(m.ServeWelcome(ok=True, mode="cached")), _frame(m.ServeWelcome(ok=False, mode="", code=1)),
        _frame(m.EmbedRequest(request=7, run_id="v1", keys=keys)),
        _frame(m.EmbedReply(request=7, known=np.array([True, True, False]),
                            values=np.ones((3, WIDTH), np.float32))),
        _frame(m.SnapshotAck(run_id="v1", seq=3, ok=True)), _frame(m.LoadVersion(run_id="v2")),
        _frame(m.VersionLoaded(run_id="v2", digest=m.pair_digest("v2", "view"), ok=True)),
        *snapshot_seeds()[:2],
    ]


# -- serving: HTTP request bodies ------------------------------------------------------------------------------------
def run_request(data: bytes) -> None:
    """An HTTP scoring request's body through the checks ``POST /score`` and ``POST /score/batch`` run."""
    from vsplit.serve.requests import parse_body, parse_row, parse_rows

    body = parse_body(data, max_bytes=64 * 1024)
    if isinstance(body, dict) and "rows" in body:
        parse_rows(body, columns=COLUMNS, nulls=True, max_rows=64)
    else:
        parse_row(body, columns=COLUMNS, nulls=False)


def request_seeds() -> list[bytes]:
    row = {"id": "42", "features": {"age": 41, "job": "admin.", "balance": -3.5}}
    return [json.dumps(row).encode(), json.dumps({"rows": [row, {**row, "id": 7}]}).encode(),
            b'{"id": "1", "features": {"age": null, "job": "x", "balance": 1e3}}',
            b'{"rows": [{"id": "1", "features": {"age": 1, "job": 2, "balance": 0}}]}']


# -- tuning ----------------------------------------------------------------------------------------------------------
#: a partner's bounds: every knob it bounds, a number range and a choice list
BOUNDS = {"embedding_width": (4, 32), "numeric_embedding": ("piecewise", "none"), "dropout": (0.0, 0.3)}


def run_tune_message(data: bytes) -> None:
    """A frame of any tune message, into the round machine of the party it is meant for: a partner's
    :class:`~vsplit.tune.rounds.AnswerRound` (a proposal, a decision, the end) or the label party's
    :class:`~vsplit.tune.rounds.ProposeRound` (an answer)."""
    from vsplit.tune import messages as t
    from vsplit.tune.rounds import AnswerRound, ProposeRound

    _, msg = codec.decode(bytearray(data))
    if isinstance(msg, t.TuneAnswer):
        ProposeRound(["shop"], number=msg.number, values={"lr": 1e-3, "embedding_width": 8}).receive("shop", msg)
    elif isinstance(msg, t.TuneProposal | t.TuneEnd):
        partner = AnswerRound("shop", bounds=BOUNDS)
        partner.receive("bank", msg)
        if isinstance(msg, t.TuneEnd):
            msg.all_scores()
        else:
            partner.receive("bank", t.TuneDecision(number=msg.number, go=not partner.refusal))
    elif isinstance(msg, t.TuneDecision):
        partner = AnswerRound("shop", bounds=BOUNDS)
        partner.receive("bank", t.TuneProposal(number=msg.number, values='{"dropout": 0.1}'))
        partner.receive("bank", msg)
    else:
        raise ProtocolError(f"{type(msg).__name__} is not a tune message")


def tune_seeds() -> list[bytes]:
    from vsplit.tune import messages as t

    return [
        _frame(t.TuneProposal(number=3, values='{"dropout":0.1,"embedding_width":8,"lr":0.001}')),
        _frame(t.TuneProposal(number=4, values='{"numeric_embedding":"periodic"}')),
        _frame(t.TuneAnswer(number=3, code=0)),
        _frame(t.TuneAnswer(number=3, code=1, knob="embedding_width", bound="[4, 32]")),
        _frame(t.TuneDecision(number=3, go=True)),
        _frame(t.TuneEnd(best=2, values='{"lr":0.003}', auc=0.91, scores='{"0":0.88,"2":0.91}')),
        _frame(t.TuneEnd(best=-1, values="", auc=0.0, scores="")),
    ]


def run_study_file(path: Path) -> None:
    """A study journal (``tune/study.log``) opened as ``vsplit tune`` resumes one, and its trials read."""
    from vsplit.tune.study import open_study

    study = open_study(storage=path, name="fuzz", seed=0)
    for trial in study.trials:
        dict(trial.params), trial.state.name, trial.value


def study_seeds() -> list[bytes]:
    from vsplit.tune.study import open_study

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "study.log"
        study = open_study(storage=path, name="fuzz", seed=0)
        for i in range(3):
            trial = study.ask()
            trial.suggest_float("lr", 1e-4, 1e-2, log=True)
            trial.suggest_categorical("numeric_embedding", ["piecewise", "none"])
            study.tell(trial, 0.8 + i / 100)
        failed = study.ask()
        failed.suggest_int("embedding_width", 4, 32)
        study.tell(failed, state=__import__("optuna").trial.TrialState.FAIL)
        whole = path.read_bytes()
    return [whole, whole[: len(whole) // 2]]


# -- explanation -----------------------------------------------------------------------------------------------------
def explain_seeds() -> list[bytes]:
    from vsplit.explain import messages as e

    sep = e.NAME_SEP
    return [
        _frame(e.ExplainRequest(n_rows=100, chunk=32, steps=16, topology="a" * 16)),
        _frame(e.PathActivations(cut=0, chunk=1, values=np.ones((18 * 4, 8), np.float32))),
        _frame(e.PathGradients(cut=1, chunk=0, values=np.zeros((3, 2), np.float32))),
        _frame(e.GroupAttribution(chunk=0, totals=np.array([0.5, -1.0]), top=np.array([[1, 0], [0, 1]], np.int32),
                                  names=f"age{sep}balance")),
        _frame(e.GroupAttribution(chunk=2, totals=np.zeros(3), top=np.zeros((3, 0), np.int32), names="")),
        # the exact method: outputs at each row's knots (2 rows: 3 and 2 knots), then a gradient per piece
        _frame(e.KnotActivations(cut=0, chunk=0, counts=np.array([3, 2], np.int32),
                                 alphas=np.array([0.0, 0.4, 1.0, 0.0, 1.0]), values=np.ones((5, 4)))),
        _frame(e.PieceGradients(cut=0, chunk=0, values=np.full((3, 4), 0.25))),
    ]


def run_calibration(path: Path) -> None:
    """A ``calibration.json`` read as ``vsplit predict`` and the scoring service read it, then applied."""
    from vsplit.explain.calibration import Calibrator

    Calibrator.load(path).apply(np.array([0.0, 0.2, 0.5, 0.97, 1.0, np.nan]))


def calibration_seeds() -> list[bytes]:
    from vsplit.explain.calibration import Calibrator

    return [json.dumps(Calibrator(method="temperature", temperature=2.5).to_dict()).encode(),
            json.dumps(Calibrator(method="isotonic", x=(0.1, 0.5, 0.9), y=(0.0, 0.4, 1.0)).to_dict()).encode()]


# -- monitoring ------------------------------------------------------------------------------------------------------
def run_scores(path: Path) -> None:
    """A ``predictions.csv`` read by ``vsplit monitor --scores/--baseline-scores``, and the score's stability."""
    from vsplit.monitor.process import read_scores
    from vsplit.monitor.views import score_stability

    score_stability(np.linspace(0.0, 1.0, 16), read_scores(path), party="bank", bins=4)


def scores_seeds() -> list[bytes]:
    return [b"customer_id,probability,status\nC-1,0.25,scored\nC-2,,unknown\nC-3,0.9,scored\n",
            b"customer_id,probability\n1,0.1\n2,0.7\n3,0.5\n4,0.45\n"]
