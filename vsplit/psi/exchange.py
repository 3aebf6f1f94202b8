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

The scalars belong to a :class:`~vsplit.psi.keys.BucketKeys` owner (this process, or Ray actors on other nodes).
An owner that submits work ahead gets this side's next chunks blinded while the current ones travel. An owner can
lose the scalars of some buckets (a node died): this side then voids every bucket from the lowest lost one ``k``
that still needed its scalar, sends :class:`Redo` ``k`` and waits. The peer voids the same buckets, renews their
scalars and echoes ``Redo(k)``; whatever either side sent for buckets ``>= k`` before the Redo (or before the echo)
is dropped, everything for earlier buckets stays valid, and both then stream buckets ``k..B-1`` again with fresh
scalars, in the same layout. Buckets are independent PSI runs, so the union of matches is unchanged. Each side
keeps the points of a bucket until it is done on both sides, so it can resend them. If both sides ask at once, both
settle on the lower bucket: a side that receives a Redo for a lower bucket than its own request voids down to it
and echoes it.

With a :class:`~vsplit.psi.resume.PairState` the exchange keeps its progress on disk: each bucket's layout when it
is laid out, and each finished bucket's matches. A rerun after a party died offers the kept session in its Hello;
if the peer kept the same one, both restore the buckets both finished and go on from there exactly as after a Redo
of the next bucket (same salt, so the same buckets; fresh scalars for the rest).

The exchange raises :class:`ProtocolError` (with an abort code) when the peer breaks the protocol, and lets
:class:`DataError` and :class:`AlignmentError` from this side's own IDs through; the party machines turn them into
abort codes.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from vsplit.data.id_sources import IdSource
from vsplit.errors import AlignmentError, DataError, ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.message import Message
from vsplit.psi import curve
from vsplit.psi.buckets import chunk_of, chunks_per_bucket
from vsplit.psi.config import PsiConfig
from vsplit.psi.handshake import check_hello, make_hello, session_salt
from vsplit.psi.ids import IdPolicy
from vsplit.psi.index import PointIndex
from vsplit.psi.keys import Pending, ScalarLost, keys_for
from vsplit.psi.matches import MatchStore
from vsplit.psi.messages import Ack, Blinded, Doubled, Hello, Redo
from vsplit.psi.parallel import Backend
from vsplit.psi.prepare import PreparedIds, prepare_ids
from vsplit.psi.resume import PairState

#: Redo rounds a pair accepts before it calls the peer's requests abuse.
MAX_REDOS = 16


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
        state: PairState | None = None,
    ) -> None:
        self.peer = peer
        self.role = role
        self.learns = config.reveal == "both" or role == "label"
        self.peer_learns = config.reveal == "both" or role == "partner"
        self._keys = keys_for(backend, config.buckets)
        self._state = state
        self.hello = make_hello(config, role=role, parties=parties, normalisation=policy.spec,
                                redo=self._keys.may_lose, resume=state.tag if state else "",
                                done=state.done if state else 0)
        self.peer_hello: Hello | None = None
        self._source, self._policy, self._config = source, policy, config
        self._may_redo = self._keys.may_lose  # either side may ask for a Redo (the peer says so in its Hello)
        self.prepared: PreparedIds | None = None
        #: The row sent at each position of this side's sent order (-1: a dummy), filled bucket by bucket.
        self.order = np.zeros(0, np.int64)
        self._laid: dict[int, np.ndarray] = {}  # laid-out buckets' points, kept while they may have to be resent
        self._ahead: deque[tuple[int, int, Pending]] = deque()  # own chunks submitted, not sent: index, bucket, work
        self._submitted = 0
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
        self._matches = MatchStore(spill=config.memory_budget_mb > 0)
        self._waiting: int | None = None  # the bucket of this side's Redo until the peer echoes it
        self._outbox: list[Message] = []
        #: The first bucket of each redo round this pair went through.
        self.redone: list[int] = []
        #: Leading buckets finished on this side (kept on disk with a state); after a resume, those restored.
        self.finished = 0
        self.resumed_from = 0
        self.points_sent = 0
        self.points_received = 0
        self.complete = False
        #: After completion, when this side learns: double-blinded values of the matches (k, 32; memory-mapped
        #: from a file under a memory budget), their agreed-order keys (:func:`~vsplit.psi.matches.order_keys`),
        #: this side's positions in its sent order, its rows, and the positions in the peer's sent order.
        self.match_values = np.zeros((0, 32), np.uint8)
        self.match_keys = np.zeros(0, np.uint64)
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

    def release_order(self) -> None:
        """Free the sent order (8 bytes per point sent) once nothing will be looked up in it any more."""
        self.order = np.zeros(0, np.int64)

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """This side's rows at ``positions`` of its sent order; a dummy position is the peer's protocol violation."""
        rows = self.order[positions]
        if len(rows) and int(rows.min()) < 0:
            raise violation("a position of a dummy point (or of a bucket not sent yet) was matched or selected")
        return rows

    # -- dispatch --------------------------------------------------------------------------------------------------
    def receive(self, msg: Message) -> list[Message]:
        """Take one message from the peer; return the messages to send back."""
        if not isinstance(msg, Hello):
            if self.prepared is None:
                raise violation(f"{type(msg).__name__} arrived before the peer's Hello")
            if self.complete:
                raise violation(f"{type(msg).__name__} arrived after the exchange was complete")
            if not isinstance(msg, (Blinded, Doubled, Ack, Redo)):
                raise violation(f"unexpected {type(msg).__name__} during the exchange")
        try:
            if isinstance(msg, Hello):
                self._on_hello(msg)
            elif isinstance(msg, Redo):
                self._on_redo(msg)
            elif self._waiting is not None and msg.bucket >= self._waiting:
                pass  # sent before the peer saw this side's Redo: void
            elif isinstance(msg, Blinded):
                self._on_blinded(msg)
            else:
                self._on_answer(msg)
            if self._waiting is None:
                self._fill()
        except ScalarLost as lost:
            self._lost(lost)
        self._release_laid()
        self._keep_finished()
        self._check_complete()
        out, self._outbox = self._outbox, []
        return out

    # -- handshake -------------------------------------------------------------------------------------------------
    def _on_hello(self, hello: Hello) -> None:
        if self.peer_hello is not None:
            raise violation("a second Hello in one session")
        check_hello(self.hello, hello)
        self.peer_hello = hello
        self._may_redo = self._keys.may_lose or hello.redo
        label_hello, partner_hello = (self.hello, hello) if self.role == "label" else (hello, self.hello)
        state, config = self._state, self._config
        resumed = state is not None and state.tag != "" and hello.resume == state.tag
        if state is not None and resumed:
            salt, keep = state.salt, min(state.done, hello.done)
        else:
            salt, keep = session_salt(label_hello=label_hello, partner_hello=partner_hello), 0
        self.prepared = prepare_ids(self._source, policy=self._policy, salt=salt, label=config.label,
                                    buckets=config.buckets, memory_budget_mb=config.memory_budget_mb,
                                    digest=state is not None)
        if self.prepared.distinct == 0:
            raise NothingToAlign(
                f"{self._source.name}: no IDs to align ({self.prepared.rows_read} rows read), so no customer is "
                "shared; check the ID column"
            )
        self.order = np.full(config.buckets * self.prepared.size, -1, np.int64)
        self._own_chunks = config.buckets * chunks_per_bucket(self.prepared.size, config.chunk)
        if state is not None:
            if keep:
                state.check_inputs(digest=self.prepared.digest, size=self.prepared.size)
            state.begin(salt=salt, digest=self.prepared.digest, size=self.prepared.size, keep=keep)
            if keep:
                self._restore(state, keep)

    def _restore(self, state: PairState, keep: int) -> None:
        """Take the first ``keep`` buckets as finished in the kept session: layouts, matches, both sides' counts."""
        assert self.prepared is not None
        size, buckets = self.prepared.size, self._config.buckets
        peer_total = state.peer_total
        if peer_total <= 0 or peer_total % buckets:
            raise DataError(f"PSI resume: the kept state in {state.folder} is damaged; delete it, rerun both parties")
        for bucket in range(keep):
            layout = state.layout(bucket)
            if len(layout) != size:
                raise DataError(f"PSI resume: bucket {bucket}'s layout in {state.folder} does not fit; delete it")
            self.order[bucket * size : (bucket + 1) * size] = layout
            self.prepared.store.drop(bucket)
            self.prepared.repeats.pop(bucket, None)
            if self.learns:
                values, own, peer = state.matches(bucket)
                if len(own):
                    self._matches.add(bucket, values, own, peer)
        self._sent = self._answered = self._submitted = keep * self._own_per_bucket()
        self.peer_total = peer_total
        peer_size = peer_total // buckets
        self._peer_seen = keep * chunks_per_bucket(peer_size, self._config.chunk)
        self._peer_offset = keep * peer_size
        self._peer_bucket, self._peer_in_bucket = keep, 0
        self.finished = self.resumed_from = keep

    # -- own chunks ------------------------------------------------------------------------------------------------
    def _chunk(self, index: int) -> tuple[int, slice]:
        assert self.prepared is not None
        return chunk_of(index, size=self.prepared.size, chunk=self._config.chunk)

    def _own_per_bucket(self) -> int:
        assert self.prepared is not None
        return chunks_per_bucket(self.prepared.size, self._config.chunk)

    def _fill(self) -> None:
        """Send own chunks while fewer than ``window`` are unanswered."""
        while self._sent < self._own_chunks and self._sent - self._answered < self._config.window:
            self._outbox.append(self._next_own())

    def _lay_out(self, bucket: int) -> np.ndarray:
        """Bucket ``bucket``'s points in sending order (laid out, and its rows recorded, on first use)."""
        assert self.prepared is not None
        if bucket not in self._laid:
            size = self.prepared.size
            order, points = self.prepared.bucket(bucket)
            self.order[bucket * size : (bucket + 1) * size] = order
            if self._state is not None:
                self._state.save_layout(bucket, order)  # before any point of it is sent
            self._laid[bucket] = points
        return self._laid[bucket]

    def _submit_until(self, stop: int) -> None:
        """Submit own chunks up to index ``stop`` (exclusive) to the scalar owner."""
        assert self.prepared is not None
        size = self.prepared.size
        while self._submitted < min(stop, self._own_chunks):
            index = self._submitted
            bucket, positions = self._chunk(index)
            points = self._lay_out(bucket)[positions.start - bucket * size : positions.stop - bucket * size]
            self._ahead.append((index, bucket, self._keys.submit(bucket, points)))
            self._submitted += 1
            if positions.stop == (bucket + 1) * size and not self._may_redo:
                del self._laid[bucket]  # the bucket is submitted: free its points
        if self._submitted == self._own_chunks:
            self.prepared.store.close()

    def _next_own(self) -> Blinded:
        assert self.prepared is not None
        self._submit_until(self._sent + 1 + self._keys.ahead)
        index, bucket, work = self._ahead[0]
        points = work.result()
        self._ahead.popleft()
        if bucket not in self._own_doubles and self.learns:
            self._own_doubles[bucket] = np.empty((self.prepared.size, curve.POINT_BYTES), np.uint8)
        self._answered_in.setdefault(bucket, 0)
        self._sent += 1
        self.points_sent += len(points)
        return Blinded(index=index, total=self.sent_total, points=points, bucket=bucket)

    def _on_answer(self, msg: Doubled | Ack) -> None:
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

    # -- peer chunks -----------------------------------------------------------------------------------------------
    def _on_blinded(self, msg: Blinded) -> None:
        if msg.index != self._peer_seen:
            raise violation(f"Blinded chunk {msg.index} out of order (expected {self._peer_seen})")
        if self.peer_total is None:
            self.peer_total = msg.total
        elif msg.total != self.peer_total:
            raise violation("the peer changed its announced set size mid-stream")
        k = len(msg.points)
        if self._peer_offset + k > msg.total:
            raise violation(f"Blinded chunk {msg.index} of {k} points does not fit the announced {msg.total}")
        place = self._peer_place(msg, k)
        try:
            doubles = self._keys.submit(msg.bucket, msg.points).result()
        except curve.LowOrderPoint as exc:
            raise violation(f"{exc} (chunk {msg.index})") from None
        self._peer_bucket, self._peer_in_bucket = place
        if self.learns:
            self._match(msg.bucket, self._peer_offset, doubles)
        self._peer_seen += 1
        self._peer_offset += k
        self.points_received += k
        if self.learns:
            self._release(msg.bucket)
        if self.peer_learns:
            self.points_sent += k
            self._outbox.append(Doubled(index=msg.index, points=doubles, bucket=msg.bucket))
        else:
            self._outbox.append(Ack(index=msg.index, bucket=msg.bucket))

    def _peer_place(self, msg: Blinded, k: int) -> tuple[int, int]:
        """Where ``msg`` leaves the peer's layout (bucket, points in it), if its buckets come in order, each exactly
        ``total / buckets`` points (its public padded size)."""
        buckets = self._config.buckets
        if msg.total % buckets:
            raise violation(f"the peer announced {msg.total} points, not a multiple of its {buckets} buckets")
        size = msg.total // buckets
        bucket, filled = self._peer_bucket, self._peer_in_bucket
        if msg.bucket == bucket + 1 and filled == size:
            bucket, filled = msg.bucket, 0
        if msg.bucket != bucket or filled + k > size:
            raise violation(f"Blinded chunk {msg.index} (bucket {msg.bucket}) breaks the padded bucket layout")
        return bucket, filled + k

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
            self._matches.add(bucket, values[hit], bucket * self.prepared.size + own[hit], offset + hit)

    def _release(self, bucket: int) -> None:
        """Free this side's values of ``bucket`` once both sides' points of it have been matched."""
        if bucket in self._index and self._peer_done_with(bucket):
            del self._index[bucket]
            self._own_doubles.pop(bucket, None)

    def _release_laid(self) -> None:
        """Free the points of laid-out buckets that neither side can have to redo any more."""
        for bucket in [b for b in self._laid if self._answered_all(b) and self._peer_done_with(b)]:
            del self._laid[bucket]

    def _keep_finished(self) -> None:
        """Count (and, with a state, keep on disk) the leading buckets nothing can change any more."""
        if self.prepared is None:
            return
        while (self.finished < self._config.buckets and self._answered_all(self.finished)
               and self._peer_done_with(self.finished)):
            if self._state is not None:
                assert self.peer_total is not None
                matches = self._matches.part(self.finished) if self.learns else None
                self._state.finish(self.finished, peer_total=self.peer_total, matches=matches)
            self.finished += 1

    # -- redo after lost scalars -----------------------------------------------------------------------------------
    def _answered_all(self, bucket: int) -> bool:
        return self._answered >= (bucket + 1) * self._own_per_bucket()

    def _needs_scalar(self, bucket: int) -> bool:
        """This side still has to blind something of ``bucket``: its own points or the peer's."""
        return self._sent < (bucket + 1) * self._own_per_bucket() or not self._peer_done_with(bucket)

    def _lost(self, lost: ScalarLost) -> None:
        """The scalar owner lost (and renewed) the scalars of ``lost.buckets``: ask the peer to redo them."""
        needed = [b for b in lost.buckets if self._needs_scalar(b)]
        if not needed:
            return
        if len(self.redone) >= MAX_REDOS:
            raise ProtocolError(f"{lost}, after {MAX_REDOS} redo rounds; check the cluster and rerun the PSI",
                                code=AbortCode.INTERNAL_ERROR)
        # While waiting for an echo only buckets below the awaited one are processed, so this one is lower still.
        self._waiting = self._void_down(needed[0])
        self._outbox.append(Redo(bucket=self._waiting))

    def _void_down(self, first: int) -> int:
        """Void from ``first``, and lower while renewing finds more lost buckets that still need their scalars."""
        extra = self._void_from(first)
        while more := [b for b in extra if b < first and self._needs_scalar(b)]:
            first = more[0]
            extra = self._void_from(first)
        return first

    def _on_redo(self, msg: Redo) -> None:
        if msg.bucket >= self._config.buckets or not self.peer_hello or not self.peer_hello.redo:
            raise violation(f"Redo of bucket {msg.bucket} from a peer that cannot lose scalars, or beyond the "
                            f"{self._config.buckets} buckets of this run")
        if self._waiting is not None and msg.bucket == self._waiting:
            self._waiting = None  # the peer's echo: from here on its messages are new
            return
        if self._waiting is not None and msg.bucket > self._waiting:
            return  # the peer's own request crossed ours; it voids down to ours and echoes it
        if len(self.redone) >= MAX_REDOS:
            raise violation(f"more than {MAX_REDOS} Redo requests in one exchange")
        extra = self._void_from(msg.bucket)
        self._waiting = None
        self._outbox.append(Redo(bucket=msg.bucket))
        if extra:  # renewing found this side's own losses: ask for those after the echo
            self._lost(ScalarLost(extra, why="found while renewing"))

    def _void_from(self, first: int) -> list[int]:
        """Forget everything either side sent for buckets ``first..B-1`` and renew their scalars; return the other
        buckets the scalar owner found lost meanwhile."""
        assert self.prepared is not None
        self.redone.append(first)
        if first < self.finished:
            raise violation(f"Redo of bucket {first}, which both sides had finished")
        buckets = range(first, self._config.buckets)
        extra = self._keys.renew(buckets)
        own_start = first * self._own_per_bucket()
        self._sent, self._answered = min(self._sent, own_start), min(self._answered, own_start)
        self._submitted = min(self._submitted, own_start)
        self._ahead = deque(item for item in self._ahead if item[0] < own_start)
        for bucket in buckets:
            self._answered_in.pop(bucket, None)
            self._own_doubles.pop(bucket, None)
            self._index.pop(bucket, None)
            self._pending.pop(bucket, None)
        self._matches.truncate(first)
        if self.peer_total is not None and self._peer_bucket >= first:
            size = self.peer_total // self._config.buckets
            self._peer_seen = first * chunks_per_bucket(size, self._config.chunk)
            self._peer_offset = first * size
            self._peer_bucket, self._peer_in_bucket = first, 0
        return extra

    # -- completion ------------------------------------------------------------------------------------------------
    def _check_complete(self) -> None:
        if self._answered < self._own_chunks or self.peer_total is None or self._peer_offset < self.peer_total:
            return
        self.complete = True
        self._own_doubles, self._index, self._pending, self._laid = {}, {}, {}, {}
        self._keys.close()
        found = self._matches.finish()
        self._matches.close()  # on disk: the files are unlinked, the memory maps stay readable
        if not self.learns or not len(found.own):
            return
        own = np.sort(found.own)
        if len(own) > 1 and bool((own[1:] == own[:-1]).any()):
            raise violation("the peer sent the same point twice")
        del own
        self.match_values, self.match_keys, self.match_own, self.match_peer = (found.values, found.keys, found.own,
                                                                                found.peer)
        self.match_rows = self.rows_at(found.own)

