"""The bank's scoring core: model versions, the partners' embeddings (asked live, or cached), one batch's scores.

Theory of operation. :class:`Scorer` holds the loaded model versions (:class:`~vsplit.serve.model.BankModel` by run
ID) and which one is active. :meth:`Scorer.score` takes one micro-batch of validated rows, reads the active version
once (so a switch never splits a batch between versions), gets each partner's embeddings of the batch's keyed IDs
(live: one request per partner, sent together, waited for at most ``serve.timeout_ms``; cached: a lookup in the
partner's last verified snapshot), scores the rows every partner knows with the split model and the others with the
bank-only fallback, and says for each row which model answered.

A new version (:meth:`Scorer.load`) is loaded beside the active one: the bank's model, then each connected partner
loads its own (and, in cached mode, sends its snapshot); only when all are ready does :meth:`Scorer.activate` swap
the active version with one assignment. Requests in flight finish on the version they started with.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vsplit.config import PartyConfig, resolve
from vsplit.data.unseen import CODE as UNSEEN
from vsplit.errors import ConfigError
from vsplit.serve import messages as m
from vsplit.serve.decoys import DecoyCover, decoy_secret
from vsplit.serve.links import PartnerDown, PartnerLink
from vsplit.serve.model import BankModel, canonical_ids
from vsplit.serve.snapshots import SnapshotStore, check_snapshot
from vsplit.serve.table import EmbeddingTable

log = logging.getLogger(__name__)

MODES = ("live", "cached")
DOWN_POLICIES = ("error", "fallback")
SPLIT, BANK_ONLY = "split", "bank_only"


@dataclass
class Row:
    """One applicant: its ID and its bank-side column values (validated)."""

    id: str
    features: dict[str, Any]


@dataclass
class Scored:
    """One row's answer: the score, the model that gave it, and why the split did not (if it did not)."""

    id: str
    score: float | list[float] | None
    model: str | None
    version: str
    unknown_to: list[str] = field(default_factory=list)
    down: list[str] = field(default_factory=list)
    #: the bank columns of the row holding a category training never saw (scored as the unknown category)
    unseen: list[str] = field(default_factory=list)
    #: a scorecard's score in points (``score`` is then its probability); ``None`` for other models
    points: float | None = None
    #: every partner's answers of this row's micro-batch, and the row's place there (:attr:`answers`): kept in this
    #: process for reason codes taken from the scoring round; never part of the answer
    batch_answers: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    row: int = field(default=-1, repr=False, compare=False)

    @property
    def answers(self) -> dict[str, np.ndarray]:
        """Each partner's answer of this row (a boosting run's decision bits: :mod:`vsplit.serve.reasons`)."""
        return {p: v[self.row] for p, v in self.batch_answers.items()}

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "score": self.score, "model": self.model, "version": self.version,
                               "fallback": self.model != SPLIT}
        if self.points is not None:
            out["points"] = self.points
        if self.unknown_to:
            out["unknown_to"] = self.unknown_to
        if self.down:
            out["partners_down"] = self.down
        if self.unseen:
            out["warnings"] = [{"code": UNSEEN, "field": f"features.{c}", "message": "a category training never saw; "
                                "scored as the unknown category"} for c in self.unseen]
        return out


@dataclass
class Batch:
    """One micro-batch being scored: its version and rows, the keys asked (``asked`` of them, ``positions``: where
    each row's true key went among the padded ones), and each partner's answer (``None``: down) or future."""

    version: BankModel
    rows: Sequence[Row]
    ids: list[str]
    positions: np.ndarray
    asked: int
    answers: dict[str, tuple[np.ndarray, np.ndarray] | None] = field(default_factory=dict)
    waiting: dict[str, Future] = field(default_factory=dict)


def check_serve_config(config: PartyConfig) -> None:
    """Refuse serve settings that cannot work, naming the key."""
    s = config.serve
    if s.mode not in MODES:
        raise ConfigError(f"serve.mode: {s.mode!r} is not one of {', '.join(MODES)}")
    if s.on_partner_down not in DOWN_POLICIES:
        raise ConfigError(f"serve.on_partner_down: {s.on_partner_down!r} is not one of {', '.join(DOWN_POLICIES)}")
    for key in ("max_batch", "max_queue", "workers", "k_anonymity", "max_body_kb"):
        if getattr(s, key) < 1:
            raise ConfigError(f"serve.{key}: must be at least 1, got {getattr(s, key)}")
    if not s.timeout_ms > 0:
        raise ConfigError(f"serve.timeout_ms: must be positive, got {s.timeout_ms}")


class Scorer:
    """Scores micro-batches for the bank (see the module docstring)."""

    def __init__(self, config: PartyConfig, *, run_id: str | None = None) -> None:
        check_serve_config(config)
        self.config = config
        self.mode = config.serve.mode
        self.timeout_s = config.serve.timeout_ms / 1000
        first = BankModel.load(config, run_id)
        self.versions: dict[str, BankModel] = {first.run_id: first}
        self.active = first.run_id
        self.links: dict[str, PartnerLink] = {}
        self.cache: dict[tuple[str, str], EmbeddingTable] = {}
        s = config.serve
        self.snapshots = SnapshotStore(max_bytes=s.max_snapshot_mb << 20, timeout_s=s.snapshot_timeout_s,
                                       max_removed=s.max_delta_removed)
        self._lock = threading.Lock()
        # the shuffle of a padded request: not from train.seed, which the partners may know
        self._rng = np.random.default_rng()
        self._covers: dict[str, DecoyCover] = {}
        if s.k_anonymity > 1 and self.mode == "live":
            self.cover(first)  # a run that cannot be covered fails here, not at its first request
        self.snapshots_received = 0

    # -- partners ----------------------------------------------------------------------------------------------------
    @property
    def model(self) -> BankModel:
        return self.versions[self.active]

    def admit(self, hello: m.ServeHello) -> m.ServeWelcome:
        """The welcome (or refusal) of a partner's hello: it must serve a version held here, with the same digest."""
        version = self.versions.get(hello.run_id)
        if version is None or hello.party not in version.partners:
            code = m.VERSION_UNKNOWN if version is None else m.NOT_SERVED
            return m.ServeWelcome(ok=False, mode="", code=code)
        if version.partners[hello.party][2] != hello.digest:
            return m.ServeWelcome(ok=False, mode="", code=m.DIGEST_MISMATCH)
        return m.ServeWelcome(ok=True, mode=self.mode)

    def connected(self, link: PartnerLink) -> None:
        """A partner's link was admitted: it replaces an earlier one; other loaded versions are loaded there too."""
        with self._lock:
            old, self.links[link.name] = self.links.get(link.name), link
        link.on_close = self._link_closed
        if not link.alive:  # dropped before it got here
            self._link_closed(link)
        if old is not None:
            old.close()
        log.info("%s: partner %s connected", self.model.name, link.name)
        for run_id in list(self.versions):
            if link.name in self.versions[run_id].partners:
                try:
                    link.load_version(run_id)  # a no-op for the version it said hello with
                except PartnerDown:
                    return

    def on_message(self, link: PartnerLink, msg: Any) -> None:
        """A message a partner sent on its own: a snapshot or delta (cached mode)."""
        if not isinstance(msg, m.Snapshot):
            raise PartnerDown(link.name, f"it sent an unexpected {type(msg).__name__}")
        ok = self._verify(link.name, msg) and self._store(link.name, msg)
        link.wire.send(m.SnapshotAck(run_id=msg.run_id, seq=msg.seq, ok=ok))

    def _verify(self, partner: str, msg: m.Snapshot) -> bool:
        cert = resolve(self.config, self.config.network.peers[partner])
        version = self.versions.get(msg.run_id)
        width = version.partners.get(partner, ("", -1, ""))[1] if version is not None else -1
        if not check_snapshot(msg, cert=cert, width=width) or version is None or not version.valid(msg.values):
            log.warning("%s: refused snapshot %d of %s from %s (bad signature, width or values)", self.model.name,
                        msg.seq, msg.run_id, partner)
            return False
        return True

    def _link_closed(self, link: PartnerLink) -> None:
        """``link`` dropped: its partner's incomplete snapshots go (unless a newer link of the partner took over)."""
        with self._lock:
            if self.links.get(link.name) in (None, link):
                self.snapshots.drop(link.name)

    def _store(self, partner: str, msg: m.Snapshot) -> bool:
        """Take a verified part (:class:`~vsplit.serve.snapshots.SnapshotStore`); whether it is accepted."""
        with self._lock:
            ok, table = self.snapshots.add(partner, msg, held=self.cache.get((partner, msg.run_id)))
            if table is None:
                return ok
            self.cache[(partner, msg.run_id)] = table
            self.snapshots_received += 1
        log.info("%s: %s snapshot of %s from %s: %d customers", self.model.name, "full" if msg.full else "delta",
                 msg.run_id, partner, len(table))
        return True

    def partner_status(self) -> dict[str, str]:
        """Each partner of the active version: ``connected``, ``down``, and in cached mode ``syncing`` (connected,
        its snapshot not yet here) or ``cached`` (link down, its last snapshot held)."""
        out = {}
        for partner in self.model.partners:
            link = self.links.get(partner)
            alive = link is not None and link.alive
            if self.mode == "cached" and (partner, self.active) not in self.cache:
                out[partner] = "syncing" if alive else "down"
            elif alive:
                out[partner] = "connected"
            else:
                out[partner] = "cached" if self.mode == "cached" else "down"
        return out

    # -- versions ----------------------------------------------------------------------------------------------------
    def load(self, run_id: str) -> BankModel:
        """Load model version ``run_id`` beside the others, here and at every partner (cached: with its snapshot)."""
        if run_id not in self.versions:
            from vsplit.serve.runs import check_run

            check_run(self.config, run_id)  # from the run folder alone, before the bank's table is read
            loaded = BankModel.load(self.config, run_id)
            if loaded.columns != self.model.columns:  # requests are checked against the active model's columns
                raise ConfigError(f"model {run_id!r} reads the bank columns {loaded.columns}, the active model "
                                  f"{self.active!r} reads {self.model.columns}; serve it from a service of its own")
            if self.mode == "live" and self.config.serve.k_anonymity > 1:
                self.cover(loaded)  # a run that cannot be covered is refused here, not at its first request
            self.versions[run_id] = loaded
        version = self.versions[run_id]
        waits = []
        for partner in version.partners:
            link = self.links.get(partner)
            if link is None or not link.alive:
                raise PartnerDown(partner, f"it must load model {run_id!r} too, but it is not connected")
            waits.append((partner, link.load_version(run_id)))
        deadline = time.monotonic() + max(30.0, self.timeout_s)
        for partner, future in waits:
            reply = _wait(future, partner, deadline)
            if not reply.ok or reply.digest != version.partners[partner][2]:
                code = reply.code if not reply.ok else m.DIGEST_MISMATCH
                raise ConfigError(f"partner {partner!r} cannot serve model {run_id!r}: {m.REFUSALS.get(code, code)}")
        if self.mode == "cached":
            for partner in version.partners:
                while (partner, run_id) not in self.cache:
                    if time.monotonic() > deadline:
                        raise PartnerDown(partner, f"its snapshot of {run_id!r} did not arrive")
                    time.sleep(0.01)
        return version

    def activate(self, run_id: str) -> None:
        """Score new requests with version ``run_id`` (loaded by :meth:`load`): one assignment, atomic."""
        if run_id not in self.versions:
            raise ConfigError(f"model {run_id!r} is not loaded; load it first (POST /v1/models)")
        self.active = run_id

    def describe(self) -> list[dict[str, Any]]:
        """The loaded versions, for ``GET /v1/models``."""
        out = []
        for run_id, version in self.versions.items():
            out.append({"run_id": run_id, "active": run_id == self.active, "partners": sorted(version.partners),
                        "digests": {p: d for p, (_, _, d) in version.partners.items()},
                        "fallback": version.fallback is not None, "columns": version.columns,
                        "id_column": version.id_column})
        return out

    # -- scoring -----------------------------------------------------------------------------------------------------
    def score(self, rows: Sequence[Row]) -> list[Scored]:
        """Score ``rows`` (one micro-batch) with the active version, waiting here for the partners (a thread's way;
        the service's event loop awaits them instead: :meth:`score_async`); see the module docstring."""
        batch = self.begin(rows)
        deadline = time.monotonic() + self.timeout_s
        for partner, future in batch.waiting.items():
            try:
                reply = _wait(future, partner, deadline)
            except PartnerDown:
                self.give_up(batch, partner, future)
                continue
            self.take(batch, partner, reply)
        return self.finish(batch)

    async def score_async(self, rows: Sequence[Row]) -> list[Scored]:
        """:meth:`score` on an event loop: the partners' answers are awaited, so the loop serves other requests
        (and gathers the next micro-batch) meanwhile. Cached mode never waits."""
        import asyncio

        batch = self.begin(rows)
        deadline = time.monotonic() + self.timeout_s
        for partner, future in batch.waiting.items():
            try:
                reply = await asyncio.wait_for(asyncio.wrap_future(future), max(0.0, deadline - time.monotonic()))
            except (asyncio.TimeoutError, PartnerDown):
                self.give_up(batch, partner, future)
                continue
            self.take(batch, partner, reply)
        return self.finish(batch)

    def begin(self, rows: Sequence[Row]) -> Batch:
        """Start scoring ``rows`` with the active version (read once: a switch during this batch does not touch
        it): cached mode looks the partners' embeddings up; live mode sends each partner its request."""
        version = self.model
        ids = canonical_ids([r.id for r in rows], casefold=version.casefold)
        keys = m.id_keys(ids, run_id=version.run_id)
        batch = Batch(version=version, rows=rows, ids=ids, positions=np.arange(len(rows)), asked=len(rows))
        if self.mode == "cached":
            for partner in version.partners:
                table = self.cache.get((partner, version.run_id))
                batch.answers[partner] = None if table is None else table.lookup(keys)
            return batch
        asked, batch.positions = self._padded(version, keys)
        batch.asked = len(asked)
        for partner in version.partners:
            link = self.links.get(partner)
            try:
                if link is None:
                    raise PartnerDown(partner, "not connected")
                batch.waiting[partner] = link.embed(version.run_id, asked)
            except PartnerDown:
                batch.answers[partner] = None
        return batch

    def take(self, batch: Batch, partner: str, reply: m.EmbedReply) -> None:
        """``partner``'s answer to ``batch``: its embeddings of the batch's rows, or down if the answer is wrong."""
        width = batch.version.partners[partner][1]
        if reply.code or reply.values.shape != (batch.asked, width) or not batch.version.valid(reply.values):
            log.warning("%s: %s answered request with code %d / shape %s; treated as down", batch.version.name,
                        partner, reply.code, reply.values.shape)
            batch.answers[partner] = None
            return
        batch.answers[partner] = (reply.known[batch.positions], reply.values[batch.positions])

    def give_up(self, batch: Batch, partner: str, future: Future) -> None:
        """``partner`` did not answer ``batch`` in time (or its link dropped): down for this batch."""
        link = self.links.get(partner)
        if link is not None:
            link.forget(future)
        batch.answers[partner] = None

    def finish(self, batch: Batch) -> list[Scored]:
        """The scores of ``batch`` once every partner answered or is down: the split where every partner knows the
        row, the bank-only fallback elsewhere (or :class:`PartnerDown` without one, per ``serve.on_partner_down``)."""
        version, rows, ids = batch.version, batch.rows, batch.ids
        run_id = version.run_id
        features = [r.features for r in rows]
        known = np.ones(len(rows), dtype=bool)
        unknown: list[list[str]] = [[] for _ in rows]
        down: list[str] = []
        embeddings: dict[str, np.ndarray] = {}
        for partner in version.partners:
            answer = batch.answers.get(partner)
            if answer is None:
                down.append(partner)
                continue
            seen, values = answer
            embeddings[partner] = values
            for i in np.flatnonzero(~seen):
                unknown[i].append(partner)
            known &= seen
        if down:
            if self.config.serve.on_partner_down != "fallback" or version.fallback is None:
                raise PartnerDown(down[0], f"no answer within {self.config.serve.timeout_ms:g} ms")
            known[:] = False
        scores: list[Any] = [None] * len(rows)
        models: list[str | None] = [None] * len(rows)
        points: list[float | None] = [None] * len(rows)
        split = np.flatnonzero(known)
        if len(split):
            picked, answers = [features[i] for i in split], {p: v[split] for p, v in embeddings.items()}
            proba = version.score(picked, answers)
            total = version.points(picked, answers) if hasattr(version, "points") else None  # a scorecard
            for j, i in enumerate(split):
                scores[i], models[i] = _value(proba[j]), SPLIT
                points[i] = None if total is None else float(total[j])
        rest = np.flatnonzero(~known)
        if len(rest):
            alone = version.score_alone([features[i] for i in rest])
            if alone is not None:
                for j, i in enumerate(rest):
                    scores[i], models[i] = _value(alone[j]), BANK_ONLY
        unseen = version.unseen(features) if hasattr(version, "unseen") else [[] for _ in rows]
        return [Scored(id=ids[i], score=scores[i], model=models[i], version=run_id, unknown_to=unknown[i],
                       down=list(down), unseen=unseen[i], points=points[i], batch_answers=embeddings, row=i)
                for i in range(len(rows))]

    def cover(self, version: BankModel) -> DecoyCover:
        """Live mode's decoys for ``version`` (:mod:`vsplit.serve.decoys`): drawn from its training intersection,
        fixed per applicant under the bank's secret of that run."""
        cover = self._covers.get(version.run_id)
        if cover is None:
            from vsplit.node.record import aligned_ids

            folder = version.node.folder
            ids = aligned_ids(folder)
            if ids is None:
                raise ConfigError(f"serve.k_anonymity: run {version.run_id!r} has no record of its training "
                                  f"intersection ({folder}/aligned-ids.npy), the only customers decoys may be drawn "
                                  "from; retrain it with this vsplit, or set serve.k_anonymity = 1")
            pool = m.id_keys(ids, run_id=version.run_id)
            cover = self._covers[version.run_id] = DecoyCover(key=decoy_secret(folder), pool=pool,
                                                              k=self.config.serve.k_anonymity)
        return cover

    def _padded(self, version: BankModel, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``keys`` hidden among ``k - 1`` decoys each (``serve.k_anonymity``), shuffled, and where each true key went.

        The decoys are customers every partner already knows (the training intersection), the same ones each time
        an applicant is scored (:mod:`vsplit.serve.decoys`, which says what a partner still learns)."""
        if self.config.serve.k_anonymity <= 1:
            return keys, np.arange(len(keys))
        cover = self.cover(version)
        with self._lock:
            rng = np.random.default_rng(self._rng.integers(1 << 62))
        return cover.pad(keys, rng=rng)


def _wait(future: Future, partner: str, deadline: float) -> Any:
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        raise PartnerDown(partner, "it did not answer in time") from None


def _value(p: Any) -> float | list[float]:
    return [float(x) for x in p] if np.ndim(p) else float(p)
