"""One pair's ECDH-PSI exchange seen from one side: the engine inside the party machines.

Theory of operation. After both :class:`Hello` messages, each side hashes its IDs under the shared salt, shuffles
them and streams them blinded with its own fresh scalar, ``window`` chunks ahead. With ``PsiConfig(buckets=B)``
the IDs are laid out bucket after bucket, each bucket padded to a public size with dummies and blinded with its own
scalar, every chunk tagged with its bucket (:mod:`vsplit.psi.buckets`); the receiver checks that each of the
peer's buckets holds exactly its share of the announced total. The peer blinds each chunk once
more and answers in the same order: with the values (:class:`Doubled`) if the sender may learn the overlap, else
with a bare :class:`Ack`. Every answer lets the sender stream one more chunk, so memory and in-flight data stay
bounded however large the sets are. A side that learns the overlap matches the double-blinded values of the peer's
chunks against those of its own: as soon as its own are complete, chunk by chunk, keeping only the matches, so the
smaller side of an unbalanced pair never stores the larger side's values. Equal double-blinded values are the same
ID; the exchange ends with, for each match, the value, this side's row and the position in the peer's sent order.

The exchange raises :class:`ProtocolError` (with an abort code) when the peer breaks the protocol, and lets
:class:`DataError` and :class:`AlignmentError` from this side's own IDs through; the party machines turn them into
abort codes.
"""

from __future__ import annotations

import numpy as np

from vsplit.errors import AlignmentError, ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.message import Message
from vsplit.psi import curve
from vsplit.psi.buckets import chunk_of, chunks_per_bucket
from vsplit.psi.config import PsiConfig
from vsplit.psi.handshake import check_hello, make_hello, session_salt
from vsplit.psi.ids import IdPolicy
from vsplit.psi.index import PointIndex
from vsplit.psi.messages import Ack, Blinded, Doubled, Hello
from vsplit.psi.parallel import Backend
from vsplit.psi.prepare import PreparedIds, prepare_ids
from vsplit.psi.sources import IdSource


class NothingToAlign(AlignmentError):
    """This side has no IDs, so the intersection is empty before anything is sent."""


def violation(text: str) -> ProtocolError:
    """A :class:`ProtocolError` blaming the peer, with abort code PROTOCOL_VIOLATION."""
    return ProtocolError(text, code=AbortCode.PROTOCOL_VIOLATION)


class PairExchange:
    """The exchange with one peer. ``role`` is this side's: ``"label"`` or ``"partner"``.

    ``parties`` goes into the Hello: the label party's party count, or 0 for a partner that follows the label.
    Everything this side keeps per bucket (its points while it sends them, its double-blinded values until the
    peer's bucket is matched, the peer's values that arrive before this side's bucket is complete) is freed as soon
    as that bucket is done, so memory follows the buckets in flight rather than the whole table.
    """

    def __init__(
        self,
        *,
        peer: str,
        role: str,
        source: IdSource,
        policy: IdPolicy,
        config: PsiConfig,
        backend: Backend,
        parties: int,
    ) -> None:
        self.peer = peer
        self.role = role
        self.learns = config.reveal == "both" or role == "label"
        self.peer_learns = config.reveal == "both" or role == "partner"
        self.hello = make_hello(config, role=role, parties=parties, normalisation=policy.spec)
        self.peer_hello: Hello | None = None
        self._source, self._policy, self._config, self._backend = source, policy, config, backend
        self._scalars = [curve.new_scalar() for _ in range(config.buckets)]
        self.prepared: PreparedIds | None = None
        #: The row sent at each position of this side's sent order (-1: a dummy), filled bucket by bucket.
        self.order = np.zeros(0, np.int64)
        self._sending: tuple[int, np.ndarray] | None = None  # the bucket being sent and its points
        self._own_chunks = 0
        self._sent = 0
        self._answered = 0
        self._own_doubles: dict[int, np.ndarray] = {}
        self._answered_in: dict[int, int] = {}
        self._index: dict[int, PointIndex] = {}
        self.peer_total: int | None = None
        self._peer_seen = 0
        self._peer_offset = 0
        self._peer_bucket = 0
        self._peer_in_bucket = 0
        self._pending: dict[int, list[tuple[int, np.ndarray]]] = {}
        self._found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.points_sent = 0
        self.points_received = 0
        self.complete = False
        #: After completion, when this side learns: double-blinded values of the matches (k, 32), this side's
        #: positions in its sent order, its rows, and the positions in the peer's sent order.
        self.match_values = np.zeros((0, 32), np.uint8)
        self.match_own = np.zeros(0, np.int64)
        self.match_rows = np.zeros(0, np.int64)
        self.match_peer = np.zeros(0, np.int64)

    @property
    def size(self) -> int:
        """This side's distinct IDs; 0 before the handshake."""
        return 0 if self.prepared is None else self.prepared.distinct

    @property
    def sent_total(self) -> int:
        """Points this side sends, dummies included; 0 before the handshake."""
        return len(self.order)

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """This side's rows at ``positions`` of its sent order; a dummy position is the peer's protocol violation."""
        rows = self.order[positions]
        if len(rows) and int(rows.min()) < 0:
            raise violation("a position of a dummy point (or of a bucket not sent yet) was matched or selected")
        return rows

    # -- dispatch --------------------------------------------------------------------------------------------------
    def receive(self, msg: Message) -> list[Message]:
        """Take one message from the peer; return the messages to send back."""
        if isinstance(msg, Hello):
            return self._on_hello(msg)
        if self.prepared is None:
            raise violation(f"{type(msg).__name__} arrived before the peer's Hello")
        if self.complete:
            raise violation(f"{type(msg).__name__} arrived after the exchange was complete")
        if isinstance(msg, Blinded):
            out = self._on_blinded(msg)
        elif isinstance(msg, (Doubled, Ack)):
            out = self._on_answer(msg)
        else:
            raise violation(f"unexpected {type(msg).__name__} during the exchange")
        self._check_complete()
        return out

    # -- handshake -------------------------------------------------------------------------------------------------
    def _on_hello(self, hello: Hello) -> list[Message]:
        if self.peer_hello is not None:
            raise violation("a second Hello in one session")
        check_hello(self.hello, hello)
        self.peer_hello = hello
        label_hello, partner_hello = (self.hello, hello) if self.role == "label" else (hello, self.hello)
        salt = session_salt(label_hello=label_hello, partner_hello=partner_hello)
        config = self._config
        self.prepared = prepare_ids(self._source, policy=self._policy, salt=salt, label=config.label,
                                    buckets=config.buckets, memory_budget_mb=config.memory_budget_mb)
        if self.prepared.distinct == 0:
            raise NothingToAlign(
                f"{self._source.name}: no IDs to align ({self.prepared.rows_read} rows read), so no customer is "
                "shared; check the ID column"
            )
        self.order = np.full(config.buckets * self.prepared.size, -1, np.int64)
        self._own_chunks = config.buckets * chunks_per_bucket(self.prepared.size, config.chunk)
        return [self._next_own() for _ in range(min(config.window, self._own_chunks))]

    # -- own chunks ------------------------------------------------------------------------------------------------
    def _chunk(self, index: int) -> tuple[int, slice]:
        assert self.prepared is not None
        return chunk_of(index, size=self.prepared.size, chunk=self._config.chunk)

    def _next_own(self) -> Blinded:
        assert self.prepared is not None
        index = self._sent
        bucket, positions = self._chunk(index)
        size = self.prepared.size
        if self._sending is None or self._sending[0] != bucket:
            order, points = self.prepared.bucket(bucket)
            self.order[bucket * size : (bucket + 1) * size] = order
            self._sending = (bucket, points)
            self._answered_in[bucket] = 0
            if self.learns:
                self._own_doubles[bucket] = np.empty((size, curve.POINT_BYTES), np.uint8)
        local = slice(positions.start - bucket * size, positions.stop - bucket * size)
        points = self._backend.blind(self._sending[1][local], scalar=self._scalars[bucket])
        self._sent += 1
        if positions.stop == (bucket + 1) * size:
            self._sending = None  # the bucket is sent: free its points
        if self._sent == self._own_chunks:
            self.prepared.store.close()
        self.points_sent += len(points)
        return Blinded(index=index, total=self.sent_total, points=points, bucket=bucket)

    def _on_answer(self, msg: Doubled | Ack) -> list[Message]:
        if msg.index != self._answered or msg.index >= self._sent:
            raise violation(f"answer to chunk {msg.index} out of order (expected {self._answered})")
        assert self.prepared is not None
        bucket, positions = self._chunk(msg.index)
        if msg.bucket != bucket:
            raise violation(f"answer to chunk {msg.index} tagged bucket {msg.bucket}, the chunk was in {bucket}")
        if isinstance(msg, Doubled):
            if not self.learns:
                raise violation("the peer returned double-blinded values this side agreed not to learn")
            base = bucket * self.prepared.size
            target = self._own_doubles[bucket][positions.start - base : positions.stop - base]
            if len(msg.points) != len(target):
                raise violation(f"Doubled chunk {msg.index} has {len(msg.points)} points, {len(target)} were sent")
            target[...] = msg.points
            self.points_received += len(msg.points)
        elif self.learns:
            raise violation("the peer withheld double-blinded values this side must learn")
        self._answered += 1
        self._answered_in[bucket] += len(range(positions.start, positions.stop))
        if self._answered_in[bucket] == self.prepared.size and self.learns:
            self._index[bucket] = PointIndex(self._own_doubles[bucket])
            for offset, values in self._pending.pop(bucket, []):
                self._match(bucket, offset, values)
            self._release(bucket)
        return [self._next_own()] if self._sent < self._own_chunks else []

    # -- peer chunks -----------------------------------------------------------------------------------------------
    def _on_blinded(self, msg: Blinded) -> list[Message]:
        if msg.index != self._peer_seen:
            raise violation(f"Blinded chunk {msg.index} out of order (expected {self._peer_seen})")
        if self.peer_total is None:
            self.peer_total = msg.total
        elif msg.total != self.peer_total:
            raise violation("the peer changed its announced set size mid-stream")
        k = len(msg.points)
        if self._peer_offset + k > msg.total:
            raise violation(f"Blinded chunk {msg.index} of {k} points does not fit the announced {msg.total}")
        self._check_peer_bucket(msg, k)
        try:
            doubles = self._backend.blind(msg.points, scalar=self._scalars[msg.bucket])
        except curve.LowOrderPoint as exc:
            raise violation(f"{exc} (chunk {msg.index})") from None
        if self.learns:
            self._match(msg.bucket, self._peer_offset, doubles)
        self._peer_seen += 1
        self._peer_offset += k
        self.points_received += k
        if self.learns:
            self._release(msg.bucket)
        if self.peer_learns:
            self.points_sent += k
            return [Doubled(index=msg.index, points=doubles, bucket=msg.bucket)]
        return [Ack(index=msg.index, bucket=msg.bucket)]

    def _check_peer_bucket(self, msg: Blinded, k: int) -> None:
        """The peer's buckets come in order, each exactly ``total / buckets`` points (its public padded size)."""
        buckets = self._config.buckets
        if msg.total % buckets:
            raise violation(f"the peer announced {msg.total} points, not a multiple of its {buckets} buckets")
        size = msg.total // buckets
        if msg.bucket == self._peer_bucket + 1 and self._peer_in_bucket == size:
            self._peer_bucket, self._peer_in_bucket = msg.bucket, 0
        if msg.bucket != self._peer_bucket or self._peer_in_bucket + k > size:
            raise violation(f"Blinded chunk {msg.index} (bucket {msg.bucket}) breaks the padded bucket layout")
        self._peer_in_bucket += k

    def _peer_done_with(self, bucket: int) -> bool:
        if bucket < self._peer_bucket:
            return True
        return bucket == self._peer_bucket and self.peer_total is not None and (
            self._peer_in_bucket == self.peer_total // self._config.buckets
        )

    def _match(self, bucket: int, offset: int, values: np.ndarray) -> None:
        index = self._index.get(bucket)
        if index is None:
            self._pending.setdefault(bucket, []).append((offset, values))
            return
        own = index.find(values)
        hit = np.flatnonzero(own >= 0)
        if hit.size:
            assert self.prepared is not None
            self._found.append((values[hit], bucket * self.prepared.size + own[hit], offset + hit))

    def _release(self, bucket: int) -> None:
        """Free this side's values of ``bucket`` once both sides' points of it have been matched."""
        if bucket in self._index and self._peer_done_with(bucket):
            del self._index[bucket]
            self._own_doubles.pop(bucket, None)

    # -- completion ------------------------------------------------------------------------------------------------
    def _check_complete(self) -> None:
        if self._answered < self._own_chunks or self.peer_total is None or self._peer_offset < self.peer_total:
            return
        self.complete = True
        self._own_doubles, self._index, self._pending = {}, {}, {}
        if not self.learns or not self._found:
            self._found = []
            return
        values, own, peer = (np.concatenate(parts) for parts in zip(*self._found, strict=True))
        self._found = []
        if len(np.unique(own)) != len(own):
            raise violation("the peer sent the same point twice")
        self.match_values, self.match_own, self.match_peer = values, own, peer
        self.match_rows = self.rows_at(own)


def agreed_order(values: np.ndarray) -> np.ndarray:
    """The agreed order of matches: ascending by double-blinded value, which both sides of a pair can compute.

    >>> agreed_order(np.array([[2] * 32, [1] * 32], np.uint8)).tolist()
    [1, 0]
    """
    if len(values) == 0:
        return np.zeros(0, np.int64)
    return np.argsort(np.ascontiguousarray(values).view(f"V{curve.POINT_BYTES}").ravel(), kind="stable")
