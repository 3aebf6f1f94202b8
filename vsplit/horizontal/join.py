"""The first stage of a horizontal run between processes: every client joins, the server answers with the roster.

Theory of operation. A schedule depends on every client's row count (:func:`compile_schedule`), so before the first
stage each client tells the server what it brings in a :class:`Join`: its rows, a digest of its columns and segment
shapes (every client must build the same segments, or averaging and hand-offs would mix unlike weights), the round
it can resume from (``-1``: a fresh start), its public X25519 key for sealed hand-offs signed by its identity
(:mod:`vsplit.horizontal.keysig`; the other clients check it) and, in a vanilla split, its labels (what that
topology sends the server). The server checks that every digest agrees and answers each client
with one :class:`Roster`: every client's rows and public key and the round the run starts from (the lowest any party
can resume from). A separate federated server is told the same roster by every client, and checks that they agree.

Sans-IO, like every machine: :class:`JoinClient`, :class:`JoinServer` and :class:`JoinFederated` only turn
messages in into messages out. What the server learns here is what the topology says it learns: rows per client,
and in a vanilla split the labels. The digest names no column values.

Example:
    >>> import numpy as np
    >>> from vsplit.protocol.machine import Outgoing
    >>> hello = {c: Join(rows=n, schema="s1", resume_round=-1, public=bytes(32).hex(), labels=np.zeros(0, np.float32),
    ...                  signature=np.ones(70, np.uint8)) for c, n in (("a", 3), ("b", 5))}
    >>> server = JoinServer(("a", "b"), own_round=-1)
    >>> server.receive("a", hello["a"]); out = server.receive("b", hello["b"])
    []
    >>> [o.to for o in out], out[0].message.rows_of(), out[0].message.start_round
    (['a', 'b'], {'a': 3, 'b': 5}, 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message, require, require_array

MAX_CLIENTS = 1024
MAX_SIGNATURE = 80
_LABEL_DTYPES = ("float32", "int64")


@message(0x0403)
@dataclass(frozen=True)
class Join(Message):
    """A client's rows, its segments' digest, the round it can resume from, its X25519 public key (hex) with its
    identity's signature over it (:mod:`vsplit.horizontal.keysig`) and, in a vanilla split, its labels in its own
    row order (else an empty array)."""

    rows: int
    schema: str
    resume_round: int
    public: str
    labels: np.ndarray
    signature: np.ndarray
    #: the float values of its averaged state (what secure aggregation masks)
    state_size: int = 0

    def __post_init__(self) -> None:
        require(self.rows >= 1, "a client joins with at least one row")
        require(0 <= self.state_size < 2**31, "state_size out of range")
        require(0 < len(self.schema) <= 128, "the schema digest has 1 to 128 characters")
        require(self.resume_round >= -1, "resume_round is -1 (fresh start) or a round")
        require(len(self.public) == 64 and all(c in "0123456789abcdef" for c in self.public),
                "the public key is 32 bytes in hex")
        require(isinstance(self.labels, np.ndarray) and self.labels.dtype.name in _LABEL_DTYPES,
                "labels are float32 or int64")
        require_array("labels", self.labels, dtype=self.labels.dtype, ndim=1)
        require(len(self.labels) in (0, self.rows), "labels: none, or one per row")
        require_array("signature", self.signature, dtype="uint8", ndim=1)
        require(0 < len(self.signature) <= MAX_SIGNATURE, f"a key signature has 1 to {MAX_SIGNATURE} bytes")


@message(0x0404)
@dataclass(frozen=True)
class Roster(Message):
    """Every client (in order, newline-joined), its rows, public key (hex, concatenated) and that key's signature
    (concatenated, with their sizes), and the first round."""

    names: str
    rows: np.ndarray
    publics: str
    start_round: int
    signatures: np.ndarray
    signature_sizes: np.ndarray
    state_size: int = 0
    #: 1: this roster takes a client that was lost back in, from ``start_round`` on (:mod:`vsplit.horizontal.readmit`)
    readmitted: int = 0

    def __post_init__(self) -> None:
        require(0 <= self.state_size < 2**31, "state_size out of range")
        require(self.readmitted in (0, 1), "readmitted is 0 or 1")
        names = self.names.split("\n") if self.names else []
        require(0 < len(names) <= MAX_CLIENTS and len(set(names)) == len(names), "1 to 1024 distinct clients")
        require_array("rows", self.rows, dtype="int64", ndim=1)
        require(len(self.rows) == len(names) and bool((self.rows >= 1).all()), "one positive row count per client")
        require(len(self.publics) == 64 * len(names), "one 32-byte public key per client")
        require(self.start_round >= 0, "start_round is a round")
        require_array("signatures", self.signatures, dtype="uint8", ndim=1)
        require_array("signature_sizes", self.signature_sizes, dtype="int64", ndim=1)
        sizes = self.signature_sizes
        require(len(sizes) == len(names) and bool(((sizes > 0) & (sizes <= MAX_SIGNATURE)).all()),
                "one signature size per client, each 1 to 80 bytes")
        require(int(sizes.sum()) == len(self.signatures), "the signature sizes add up to the signatures' bytes")

    def clients(self) -> list[str]:
        return self.names.split("\n")

    def rows_of(self) -> dict[str, int]:
        return dict(zip(self.clients(), (int(n) for n in self.rows), strict=True))

    def publics_of(self) -> dict[str, bytes]:
        return {c: bytes.fromhex(self.publics[64 * i : 64 * i + 64]) for i, c in enumerate(self.clients())}

    def signatures_of(self) -> dict[str, bytes]:
        ends = np.cumsum(self.signature_sizes).tolist()
        starts = [0, *ends[:-1]]
        data = self.signatures.tobytes()
        return {c: data[a:b] for c, a, b in zip(self.clients(), starts, ends, strict=True)}


class JoinClient:
    """A client's join: send :class:`Join` to the server, take its :class:`Roster`, pass it to ``forward_to`` (a
    separate federated server). ``result``: the roster."""

    def __init__(self, join: Join, *, server: str, forward_to: Sequence[str] = ()) -> None:
        self.join, self.server, self.forward_to = join, server, list(forward_to)
        self.done, self.result = False, None

    def start(self) -> list[Outgoing]:
        return [Outgoing(self.server, self.join)]

    def expects(self, peer: str) -> bool:
        return not self.done and peer == self.server

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if not self.expects(sender) or not isinstance(msg, Roster):
            raise ProtocolError(f"join: {type(msg).__name__} from {sender!r} not expected now")
        self.done, self.result = True, msg
        return [Outgoing(peer, msg) for peer in self.forward_to]


class JoinServer:
    """The server's join: one :class:`Join` per client, the same digest from all, then the :class:`Roster` to each.
    ``result``: ``(roster, joins by client)``. ``own_round``: the round this server can resume from (-1: none)."""

    def __init__(self, clients: Sequence[str], *, own_round: int) -> None:
        self.clients, self.own_round = list(clients), own_round
        self.joins: dict[str, Join] = {}
        self.done, self.result = False, None

    def start(self) -> list[Outgoing]:
        return []

    def expects(self, peer: str) -> bool:
        return not self.done and peer in self.clients and peer not in self.joins

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if not self.expects(sender) or not isinstance(msg, Join):
            raise ProtocolError(f"join: {type(msg).__name__} from {sender!r} not expected now")
        self.joins[sender] = msg
        if len(self.joins) < len(self.clients):
            return []
        schemas = {c: (j.schema, j.state_size) for c, j in self.joins.items()}
        if len(set(schemas.values())) > 1:
            first = self.clients[0]
            odd = [c for c in self.clients if schemas[c] != schemas[first]]
            raise ProtocolError(f"join: {', '.join(odd)} built other segments than {first} (other columns, "
                                "categories, model settings or initial weights); every client needs the same columns "
                                f"and [model], and the same clients.init-seed as {first} (or train.init_seed = "
                                "\"seed\" and the same train.seed at every client)",
                                code=AbortCode.CONFIG_MISMATCH)
        rounds = [j.resume_round for j in self.joins.values()] + [self.own_round]
        start = 0 if min(rounds) < 0 else min(rounds) + 1
        roster = Roster(names="\n".join(self.clients),
                        rows=np.array([self.joins[c].rows for c in self.clients], np.int64),
                        publics="".join(self.joins[c].public for c in self.clients), start_round=start,
                        signatures=np.concatenate([self.joins[c].signature for c in self.clients]),
                        signature_sizes=np.array([len(self.joins[c].signature) for c in self.clients], np.int64),
                        state_size=self.joins[self.clients[0]].state_size)
        self.done, self.result = True, (roster, dict(self.joins))
        return [Outgoing(c, roster) for c in self.clients]


class JoinFederated:
    """A separate federated server's join: the roster from every client, all the same. ``result``: the roster."""

    def __init__(self, clients: Sequence[str]) -> None:
        self.clients = list(clients)
        self.got: dict[str, Roster] = {}
        self.done, self.result = False, None

    def start(self) -> list[Outgoing]:
        return []

    def expects(self, peer: str) -> bool:
        return not self.done and peer in self.clients and peer not in self.got

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if not self.expects(sender) or not isinstance(msg, Roster):
            raise ProtocolError(f"join: {type(msg).__name__} from {sender!r} not expected now")
        self.got[sender] = msg
        if len(self.got) == len(self.clients):
            first: Any = self.got[self.clients[0]]
            same = [(r.names, r.publics, r.start_round, r.state_size)
                    == (first.names, first.publics, first.start_round, first.state_size)
                    and all(np.array_equal(getattr(r, f), getattr(first, f))
                            for f in ("rows", "signatures", "signature_sizes")) for r in self.got.values()]
            if not all(same):
                raise ProtocolError("join: the clients forwarded different rosters", code=AbortCode.CONFIG_MISMATCH)
            if first.clients() != self.clients:
                raise ProtocolError("join: the roster names other clients than this config",
                                    code=AbortCode.CONFIG_MISMATCH)
            self.done, self.result = True, first
        return []
