"""The messages between the bank's scoring service and a partner's daemon: frozen dataclasses, never pickle.

Theory of operation. A partner daemon dials the bank over mutual TLS and says :class:`ServeHello` (its name, the run
it serves and the *pair digest* of that run, :func:`pair_digest`); the bank answers :class:`ServeWelcome` (the mode
it scores in) or refuses a version it does not hold (``ok=False`` and a code, nothing else). Then:

- ``live``: the bank sends :class:`EmbedRequest` (keyed IDs of one micro-batch) and the partner answers
  :class:`EmbedReply` (which it knows, and their embeddings). The bank's columns and scores never cross.
- ``cached``: the partner sends :class:`Snapshot` (every customer's keyed ID and embedding, signed with its TLS key),
  then a delta :class:`Snapshot` (``full=False``) each time its table changes; the bank acknowledges with
  :class:`SnapshotAck`, which carries no ID. Nothing about who is scored crosses.
- reason codes (live only, when a request asks for them): :class:`ExplainOpen` (the keyed IDs to explain), then the
  explanation exchange of ``vsplit explain``, each of its messages wrapped in an :class:`ExplainStep`.

A new model version is loaded beside the old one with :class:`LoadVersion` / :class:`VersionLoaded`.
IDs cross as 16-byte keys (:func:`id_keys`, SHA-256 of the run and the ID), never as text: that keeps them off logs
and frames, but a party holding a list of candidate IDs can test them, so keys are pseudonyms, not secrets.

Example:
    >>> keys = id_keys(["42", "7"], run_id="r1")
    >>> keys.shape, keys.dtype.name
    ((2, 16), 'uint8')
    >>> EmbedRequest(request=1, run_id="r1", keys=keys).keys.shape[0]
    2
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from vsplit.protocol.message import Message, message, require, require_array

#: bytes of a keyed ID
KEY_BYTES = 16
#: the most rows one live request or one snapshot frame carries (a larger table is sent in several frames)
MAX_ROWS = 1 << 20

#: refusal codes (the peer learns the number, never a text)
VERSION_UNKNOWN, DIGEST_MISMATCH, NOT_SERVED, BAD_REQUEST, INTERNAL, RUN_REFUSED = 1, 2, 3, 4, 5, 6
#: refusal codes of an explanation (:class:`ExplainOpen`)
UNKNOWN_CUSTOMER, NOT_EXPLAINABLE = 7, 8
#: the most applicants one explanation carries, and the largest explanation frame an :class:`ExplainStep` wraps
MAX_EXPLAIN_ROWS, MAX_EXPLAIN_FRAME = 1024, 64 << 20
#: the most networks a served bag holds (``[ensemble] networks`` allows 1 to 50)
MAX_NETWORKS = 64
REFUSALS = {VERSION_UNKNOWN: "the peer does not hold this model version (its run ID)",
            DIGEST_MISMATCH: "the two parties' models of this run do not pair (version digest differs)",
            NOT_SERVED: "the peer does not serve this party", BAD_REQUEST: "the peer refused a malformed request",
            INTERNAL: "the peer hit an internal error (see its own log)",
            RUN_REFUSED: "the partner does not serve this run to this bank (its serve.runs does not name it, or the "
                         "run was trained with another bank)",
            UNKNOWN_CUSTOMER: "the partner does not know a customer it was asked to explain",
            NOT_EXPLAINABLE: "the partner's model of this run cannot be explained (a bag of networks, or trees)"}


def id_keys(ids: Iterable[str], *, run_id: str) -> np.ndarray:
    """The 16-byte keys of ``ids`` (canonical text) for ``run_id``: ``(n, 16)`` uint8."""
    salt = f"vsplit-serve-id:{run_id}:".encode()
    digests = [hashlib.sha256(salt + i.encode()).digest()[:KEY_BYTES] for i in ids]
    if not digests:
        return np.zeros((0, KEY_BYTES), dtype=np.uint8)
    return np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, KEY_BYTES).copy()


def pair_digest(run_id: str, view: str) -> str:
    """The version digest both sides compute: the run ID and the topology view the pair shares (its segments, cuts
    and widths); a bank and a partner with different digests refuse to pair.

    >>> pair_digest("r1", "abc") == pair_digest("r1", "abc") != pair_digest("r2", "abc")
    True
    """
    return hashlib.sha256(f"vsplit-serve:{run_id}:{view}".encode()).hexdigest()[:32]


def _keys(name: str, keys: np.ndarray) -> None:
    require_array(name, keys, dtype="uint8", ndim=2, width=KEY_BYTES)
    require(keys.shape[0] <= MAX_ROWS, f"{name}: at most {MAX_ROWS} rows per frame")


def _values(values: np.ndarray) -> None:
    """A partner's vectors: float32 embeddings (a network), uint8 decision bits, each 0 or 1 (boosted trees), or
    float64 points, one a customer (a scorecard)."""
    if isinstance(values, np.ndarray) and values.dtype == np.uint8:
        require(values.ndim == 2, "values: decision bits must be 2-d (rows, records)")
        require(values.size == 0 or int(values.max()) <= 1, "values: a decision bit other than 0 or 1")
        return
    if isinstance(values, np.ndarray) and values.dtype == np.float64:
        require(values.ndim == 2 and values.shape[1] == 1, "values: points must be 2-d, one a customer")
        return
    require_array("values", values, dtype="float32", ndim=2)


@message(0x0A01)
@dataclass(frozen=True)
class ServeHello(Message):
    """Partner -> bank, first: who it is, the run it serves and that run's :func:`pair_digest`."""

    party: str
    run_id: str
    digest: str


@message(0x0A02)
@dataclass(frozen=True)
class ServeWelcome(Message):
    """Bank -> partner: accepted (and the mode: ``live`` or ``cached``), or refused with a code."""

    ok: bool
    mode: str
    code: int = 0

    def __post_init__(self) -> None:
        require(self.mode in ("live", "cached", ""), f"unknown serving mode {self.mode!r}")


@message(0x0A03)
@dataclass(frozen=True)
class EmbedRequest(Message):
    """Bank -> partner (live): the keyed IDs of one micro-batch, for model version ``run_id``."""

    request: int
    run_id: str
    keys: np.ndarray

    def __post_init__(self) -> None:
        require(self.request >= 0, "request must be non-negative")
        _keys("keys", self.keys)


@message(0x0A04)
@dataclass(frozen=True)
class EmbedReply(Message):
    """Partner -> bank (live): per asked key, whether it knows the customer, and the embeddings (zeros if not); of a
    boosting run, the customer's decision bits (uint8, one per record the partner keeps) instead."""

    request: int
    known: np.ndarray
    values: np.ndarray
    code: int = 0

    def __post_init__(self) -> None:
        require_array("known", self.known, dtype="bool", ndim=1)
        _values(self.values)
        require(self.values.shape[0] == self.known.shape[0], "one row of values per key")


@message(0x0A05)
@dataclass(frozen=True)
class Snapshot(Message):
    """Partner -> bank (cached): embeddings by keyed ID, signed (ECDSA P-256 over :func:`snapshot_digest`) with the
    partner's TLS key. ``full``: every customer (replaces what the bank holds); else a delta: these rows changed or
    are new, ``removed`` are gone. ``part``/``parts``: a large snapshot is split into frames."""

    run_id: str
    seq: int
    full: bool
    part: int
    parts: int
    keys: np.ndarray
    values: np.ndarray
    removed: np.ndarray
    signature: np.ndarray

    def __post_init__(self) -> None:
        _keys("keys", self.keys)
        _keys("removed", self.removed)
        _values(self.values)
        require(self.values.shape[0] == self.keys.shape[0], "one row of values per key")
        require(0 <= self.part < self.parts, "part out of range")
        require_array("signature", self.signature, dtype="uint8", ndim=1)


def snapshot_digest(run_id: str, seq: int, full: bool, part: int, parts: int, keys: np.ndarray, values: np.ndarray,
                    removed: np.ndarray) -> bytes:
    """What a :class:`Snapshot`'s signature covers: every field but the signature."""
    h = hashlib.sha256(f"vsplit-snapshot:{run_id}:{seq}:{int(full)}:{part}:{parts}:".encode())
    for array in (keys, values, removed):
        h.update(str(array.shape).encode())
        h.update(np.ascontiguousarray(array).tobytes())
    return h.digest()


@message(0x0A06)
@dataclass(frozen=True)
class SnapshotAck(Message):
    """Bank -> partner (cached): snapshot ``seq`` of ``run_id`` received and verified (``ok``), or refused."""

    run_id: str
    seq: int
    ok: bool


@message(0x0A07)
@dataclass(frozen=True)
class LoadVersion(Message):
    """Bank -> partner: load model version ``run_id`` beside the ones served (for an atomic switch)."""

    run_id: str


@message(0x0A08)
@dataclass(frozen=True)
class VersionLoaded(Message):
    """Partner -> bank: version ``run_id`` is loaded (its :func:`pair_digest`), or refused with a code."""

    run_id: str
    digest: str
    ok: bool
    code: int = 0


@message(0x0A21)
@dataclass(frozen=True)
class ExplainOpen(Message):
    """Bank -> partner (live): explain the customers ``keys`` under model ``run_id`` jointly, as ``vsplit explain``
    does (:mod:`vsplit.serve.explain_link`); the exchange that follows is request ``request``'s. ``network``: which
    network of an ensemble's bag (0 for a run of one network)."""

    request: int
    run_id: str
    keys: np.ndarray
    network: int = 0

    def __post_init__(self) -> None:
        require(self.request >= 0, "request must be non-negative")
        require(0 <= self.network < MAX_NETWORKS, f"network must be 0 to {MAX_NETWORKS - 1}")
        _keys("keys", self.keys)
        require(1 <= self.keys.shape[0] <= MAX_EXPLAIN_ROWS, f"1 to {MAX_EXPLAIN_ROWS} customers per explanation")


@message(0x0A22)
@dataclass(frozen=True)
class ExplainStep(Message):
    """Either way (live): one message of explanation ``request``'s exchange (an
    :class:`~vsplit.explain.messages.ExplainRequest`, path activations or gradients, a group attribution), as a
    codec frame of the serving session in ``frame``; or the partner's refusal ``code`` and an empty frame."""

    request: int
    frame: np.ndarray
    code: int = 0

    def __post_init__(self) -> None:
        require(self.request >= 0, "request must be non-negative")
        require_array("frame", self.frame, dtype="uint8", ndim=1)
        require(len(self.frame) <= MAX_EXPLAIN_FRAME, f"an explanation frame holds at most {MAX_EXPLAIN_FRAME} bytes")
        require((self.code == 0) == (len(self.frame) > 0), "a step carries a frame or a refusal code, not both")
