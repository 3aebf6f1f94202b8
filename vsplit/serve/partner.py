"""A partner's scoring daemon: its bottom model and feature table, answering the bank over mutual TLS.

Theory of operation. ``vsplit serve --config party.toml`` at a feature party loads its saved bottom of the run (the
model version), reads its feature table (``serve.table``, default ``data.path``; Parquet or CSV) and embeds every
customer once. It then dials the bank's serving address (``serve.address``, default ``network.dial``: like training,
the partner needs only an outbound connection), says hello with the run and its version digest, and serves:

- live mode: it answers each :class:`~vsplit.serve.messages.EmbedRequest` from its embeddings (a key it does not know
  is answered "unknown", never an error). It learns which keyed IDs the bank asks for, nothing else.
- cached mode: it sends a signed :class:`~vsplit.serve.messages.Snapshot` of every customer, then a delta whenever
  its table file changes. It learns nothing about who is scored.
- reason codes (live mode, when a request to the bank asks for them): it answers the bank's explanation of the
  applicants the split scored as ``vsplit explain`` does (:mod:`vsplit.serve.explain_partner`).

The table is checked for changes every ``serve.reload_s`` seconds and re-embedded when it changed. When the link
drops (the bank restarts) the daemon dials again, until it is stopped (promptly: a dial lasts about a second, then
the daemon waits, backing off, on its stop event).

A partner serves only the runs its own config names (``serve.runs``, default ``output.run_id``, and the run given
with ``--run-id``), and each only to the bank it was trained with: the certificate pinned for the bank must have the
fingerprint the run recorded in training (:func:`vsplit.node.record.check_trained_with`). A bank asking for any
other run is refused with a code (:data:`~vsplit.serve.messages.RUN_REFUSED`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np

from vsplit.config import PartyConfig, resolve
from vsplit.config.names import run_folder
from vsplit.errors import ConfigError, TransportError, VsplitError
from vsplit.serve import messages as m
from vsplit.serve.model import PartnerModel
from vsplit.serve.table import EmbeddingTable
from vsplit.serve.wire import Wire, serve_session

log = logging.getLogger(__name__)

#: rows per snapshot frame
SNAPSHOT_ROWS = 65536
#: seconds one dial of a bank that is down may take (the daemon checks its stop event between dials), and the
#: longest wait between two dials
DIAL_S, MAX_BACKOFF_S = 1.0, 5.0


class Refused(ConfigError):
    """The bank refused this partner's hello (another version, or a digest that does not pair)."""


class NotServed(ConfigError):
    """The bank asked for a run this partner does not serve (not named in its config, or trained with another bank)."""


class PartnerDaemon:
    """Serve ``config``'s party (a feature party) for model version ``run_id`` (default ``output.run_id``)."""

    def __init__(self, config: PartyConfig, *, run_id: str | None = None) -> None:
        self.config = config
        self.me = config.party.name
        if len(config.network.peers) != 1:
            raise ConfigError(f"network.peers: a partner daemon serves one bank, got {sorted(config.network.peers)}")
        (self.bank,) = config.network.peers
        self.table_path = resolve(config, config.serve.table or config.data.path)
        self._lock = threading.Lock()  # swaps of the models and tables dicts (readers take the dict they find)
        self._reloading: threading.Thread | None = None
        self._loading = threading.Lock()  # one version load or table reload at a time
        self.runs = frozenset(config.serve.runs or (config.output.run_id,)) | ({run_id} if run_id else set())
        self.check_run(run_id or config.output.run_id)
        first = PartnerModel.load(config, run_id)
        self.models: dict[str, PartnerModel] = {first.run_id: first}
        self.default = first.run_id
        self.tables: dict[str, EmbeddingTable] = {}
        self._stamp: tuple[int, int] | None = None
        self.reload()
        self.stop = threading.Event()
        self.wire: Wire | None = None
        self.mode = ""
        self._seq = 0
        self._sent: set[str] = set()
        self.explainer: Any = None  # answers the bank's explanations (reason codes), made on the first one

    # -- the table ---------------------------------------------------------------------------------------------------
    def stamp(self) -> tuple[int, int]:
        st = self.table_path.stat()
        return st.st_mtime_ns, st.st_size

    def reload(self) -> bool:
        """Read the table and embed it for every loaded version if the file changed; whether it did."""
        try:
            stamp = self.stamp()
        except OSError as exc:
            raise ConfigError(f"serve.table: cannot read {self.table_path} ({exc.strerror}); set serve.table to "
                              "this party's feature table") from None
        if stamp == self._stamp:
            return False
        from vsplit.data.sources import read_table

        with self._loading:  # not while a version loads: it reads the table itself
            models = dict(self.models)
            columns = next(iter(models.values())).feature_columns
            table = read_table(self.table_path, id_column=self.config.data.id_column, features=columns,
                               option="serve.table")
            tables = {run: self._embed(model, table) for run, model in models.items()}
            with self._lock:
                self.tables = {**self.tables, **tables}
        self._stamp = stamp
        log.info("%s: serving %d customers of %s", self.me, len(table), self.table_path.name)
        return True

    def _embed(self, model: PartnerModel, table: Any) -> EmbeddingTable:
        ids, values = model.embed(table)
        built = EmbeddingTable.build(m.id_keys(ids, run_id=model.run_id), values)
        if len(built) < len(ids):
            log.warning("%s: %d IDs appear more than once in %s; each is served with its first row", self.me,
                        len(ids) - len(built), self.table_path.name)
        return built

    def check_run(self, run_id: str) -> None:
        """Refuse run ``run_id`` unless this party's config names it and it was trained with the bank pinned here."""
        from vsplit.node.record import check_trained_with

        if run_id not in self.runs:
            raise NotServed(f"{self.bank} asked for run {run_id!r}, which this partner does not serve "
                            f"(serve.runs: {', '.join(sorted(self.runs))}); add it to serve.runs to serve it")
        folder = run_folder(resolve(self.config, self.config.output.dir), run_id, self.me)
        try:
            check_trained_with(self.config, folder, run_id=run_id, peer=self.bank)
        except ConfigError as exc:
            raise NotServed(str(exc)) from None

    def load_version(self, run_id: str) -> PartnerModel:
        """Load model version ``run_id`` beside those served (its table embedded too)."""
        with self._loading:
            if run_id not in self.models:
                from vsplit.data.sources import read_table

                self.check_run(run_id)
                model = PartnerModel.load(self.config, run_id)
                table = read_table(self.table_path, id_column=self.config.data.id_column,
                                   features=model.feature_columns, option="serve.table")
                embedded = self._embed(model, table)
                with self._lock:
                    self.tables = {**self.tables, run_id: embedded}
                    self.models = {**self.models, run_id: model}
        return self.models[run_id]

    # -- the link ----------------------------------------------------------------------------------------------------
    def run(self) -> None:
        """Dial the bank and serve it; dial again when the link drops, until :meth:`close`."""
        from vsplit.node.links import parse_address
        from vsplit.transport.connect import dial
        from vsplit.transport.pinning import Credentials
        from vsplit.transport.stream import ChannelOptions

        net = self.config.network
        address = self.config.serve.address or net.dial
        if not address:
            raise ConfigError(f"serve.address: {self.me} dials the bank's scoring service; set e.g. "
                              "address = \"bank.example:7800\" (or network.dial)")
        where = parse_address(address, key="serve.address")
        creds = Credentials.load(self.me, own_cert=resolve(self.config, net.cert),
                                 own_key=resolve(self.config, net.key),
                                 peers={self.bank: resolve(self.config, net.peers[self.bank])})
        pause = 0.2
        while not self.stop.is_set():
            try:  # short dials: a stop (SIGTERM) is seen within about DIAL_S, not after network.connect_timeout_s
                channel = dial(creds, peer=self.bank, address=where, deadline_s=min(DIAL_S, net.connect_timeout_s),
                               options=ChannelOptions(max_frame=net.max_frame_mb << 20))
            except TransportError as exc:
                if self.stop.is_set():
                    return
                log.warning("%s: %s; dialing again in %.1f s", self.me, exc, pause)
                self.stop.wait(pause)
                pause = min(MAX_BACKOFF_S, pause * 2)
                continue
            pause = 0.2
            try:
                self.serve(channel)
            except Refused:
                raise
            except (TransportError, VsplitError) as exc:
                log.warning("%s: link to %s lost (%s); dialing again", self.me, self.bank, exc)
            finally:
                channel.close()
            self.stop.wait(0.2)

    def serve(self, channel: Any) -> None:
        """Say hello on ``channel`` and answer the bank until the link closes or :meth:`close`."""
        from vsplit.transport.channel import RecvTimeout

        wire = self.wire = Wire(channel, peer=self.bank, session=serve_session(self.bank, self.me))
        model = self.models[self.default]
        wire.send(m.ServeHello(party=self.me, run_id=model.run_id, digest=model.digest))
        welcome = wire.recv(self.config.network.read_timeout_s)
        if not isinstance(welcome, m.ServeWelcome):
            raise TransportError(f"{self.bank} answered the hello with {type(welcome).__name__}")
        if not welcome.ok:
            raise Refused(f"{self.bank} refused to pair with {self.me}'s model {model.run_id!r}: "
                          f"{m.REFUSALS.get(welcome.code, welcome.code)}; serve the run the bank serves")
        self.mode = welcome.mode
        self._sent: set[str] = set()  # versions whose full snapshot went on this link
        if self.explainer is not None:  # the last link's explanations are abandoned with it
            self.explainer.close()
            self.explainer = None
        log.info("%s: paired with %s (model %s, %s mode)", self.me, self.bank, model.run_id, self.mode)
        if self.mode == "cached":
            self.send_snapshot(model.run_id, full=True)
        tick = max(0.05, self.config.serve.reload_s)
        while not self.stop.is_set():
            try:
                msg = wire.recv(tick)
            except RecvTimeout:
                self.check_table()
                continue
            self.handle(msg)

    def check_table(self) -> None:
        """Re-read the table in the background if its file changed: requests are answered meanwhile."""
        if self._reloading is not None and self._reloading.is_alive():
            return
        try:
            if self.stamp() == self._stamp:
                return
        except OSError:
            return  # being replaced: next tick
        self._reloading = threading.Thread(target=self._reload_and_send, daemon=True, name="vsplit-serve-reload")
        self._reloading.start()

    def _reload_and_send(self) -> None:
        old = dict(self.tables)
        try:
            changed = self.reload()
        except VsplitError as exc:  # a half-written table: keep serving the last good one
            log.warning("%s: table not reloaded (%s)", self.me, exc)
            return
        except Exception:  # a bug: keep serving the last good table
            log.exception("%s: reloading the table failed", self.me)
            return
        if changed and self.mode == "cached":
            try:
                for run_id in self.tables:
                    if run_id in old:
                        self.send_delta(run_id, old[run_id])
            except TransportError as exc:  # the link dropped: the bank gets a full snapshot when it is back
                log.warning("%s: delta not sent (%s)", self.me, exc)

    def handle(self, msg: Any) -> None:
        assert self.wire is not None
        if isinstance(msg, m.EmbedRequest):
            table = self.tables.get(msg.run_id)
            if table is None:
                width = next(iter(self.tables.values())).width
                self.wire.send(m.EmbedReply(request=msg.request, known=np.zeros(0, bool),
                                            values=np.zeros((0, width), np.float32), code=m.VERSION_UNKNOWN))
                return
            known, values = table.lookup(msg.keys)
            self.wire.send(m.EmbedReply(request=msg.request, known=known, values=values))
        elif isinstance(msg, m.LoadVersion):
            if msg.run_id not in self.runs:  # checked here too: nothing of another run is read
                log.warning("%s: %s asked for run %r, which this partner does not serve (serve.runs: %s)", self.me,
                            self.bank, msg.run_id, ", ".join(sorted(self.runs)))
                self._send(m.VersionLoaded(run_id=msg.run_id, digest="", ok=False, code=m.RUN_REFUSED))
            elif msg.run_id in self.models:
                self._loaded(msg.run_id)
            else:  # loading takes seconds: requests of the served versions are answered meanwhile
                threading.Thread(target=self._load_in_background, args=(msg.run_id,), daemon=True,
                                 name=f"vsplit-serve-load-{msg.run_id}").start()
        elif isinstance(msg, m.SnapshotAck):
            if not msg.ok:
                log.warning("%s: %s refused snapshot %d of %s", self.me, self.bank, msg.seq, msg.run_id)
        elif isinstance(msg, m.ExplainOpen | m.ExplainStep):
            self.explain(msg)
        else:
            raise TransportError(f"{self.bank} sent an unexpected {type(msg).__name__}")

    def explain(self, msg: m.ExplainOpen | m.ExplainStep) -> None:
        """A message of an explanation the bank asks for (reason codes, live mode only: in cached mode the partner
        learns nothing of who is scored, so it refuses): :mod:`vsplit.serve.explain_partner`."""
        if self.mode != "live":
            if isinstance(msg, m.ExplainOpen):
                self._send(m.ExplainStep(request=msg.request, frame=np.zeros(0, np.uint8), code=m.BAD_REQUEST))
            return
        if self.explainer is None:
            from vsplit.serve.explain_partner import PartnerExplainer

            self.explainer = PartnerExplainer(
                me=self.me, bank=self.bank, models=lambda: self.models, read=self._serving_table, stamp=self.stamp,
                send=self._send, session=serve_session(self.bank, self.me),
                share_top_k=self.config.explain.share_top_k)
        self.explainer.handle(msg)

    def _serving_table(self, model: Any) -> Any:
        from vsplit.data.sources import read_table

        return read_table(self.table_path, id_column=self.config.data.id_column, features=model.feature_columns,
                          option="serve.table")

    def _load_in_background(self, run_id: str) -> None:
        try:
            self.load_version(run_id)
        except NotServed as exc:
            log.warning("%s: refused to serve run %s: %s", self.me, run_id, exc)
            self._send(m.VersionLoaded(run_id=run_id, digest="", ok=False, code=m.RUN_REFUSED))
            return
        except VsplitError as exc:
            log.warning("%s: cannot load version %s: %s", self.me, run_id, exc)
            self._send(m.VersionLoaded(run_id=run_id, digest="", ok=False, code=m.VERSION_UNKNOWN))
            return
        except Exception:  # a bug: the bank is told, this daemon goes on serving the loaded versions
            log.exception("%s: loading version %s failed", self.me, run_id)
            self._send(m.VersionLoaded(run_id=run_id, digest="", ok=False, code=m.INTERNAL))
            return
        self._loaded(run_id)

    def _loaded(self, run_id: str) -> None:
        """Tell the bank version ``run_id`` is loaded (cached mode: with its snapshot, once per link)."""
        try:
            self._send(m.VersionLoaded(run_id=run_id, digest=self.models[run_id].digest, ok=True))
            if self.mode == "cached" and run_id not in self._sent:
                self.send_snapshot(run_id, full=True)
        except TransportError as exc:  # the link dropped meanwhile: the bank asks again when it is back
            log.warning("%s: could not tell %s about version %s (%s)", self.me, self.bank, run_id, exc)

    def _send(self, msg: Any) -> None:
        if self.wire is not None:
            self.wire.send(msg)

    # -- cached mode -------------------------------------------------------------------------------------------------
    def send_snapshot(self, run_id: str, *, full: bool, keys: np.ndarray | None = None,
                      values: np.ndarray | None = None, removed: np.ndarray | None = None) -> None:
        """Send every customer of ``run_id`` (``full``) or a delta, signed, in frames of :data:`SNAPSHOT_ROWS`."""
        assert self.wire is not None
        table = self.tables[run_id]
        keys = table.keys if keys is None else keys
        values = table.values if values is None else values
        removed = np.zeros((0, m.KEY_BYTES), np.uint8) if removed is None else removed
        with self._lock:
            if full:
                self._sent.add(run_id)
            # strictly increasing, across this daemon's restarts too (the bank refuses a seq not after the last)
            self._seq = seq = max(self._seq + 1, time.time_ns() // 1000)
        parts = max(1, -(-len(keys) // SNAPSHOT_ROWS))
        for part in range(parts):
            k = np.ascontiguousarray(keys[part * SNAPSHOT_ROWS:(part + 1) * SNAPSHOT_ROWS])
            v = np.ascontiguousarray(values[part * SNAPSHOT_ROWS:(part + 1) * SNAPSHOT_ROWS])
            r = removed if part == 0 else removed[:0]
            digest = m.snapshot_digest(run_id, seq, full, part, parts, k, v, r)
            self.wire.send(m.Snapshot(run_id=run_id, seq=seq, full=full, part=part, parts=parts, keys=k,
                                      values=v, removed=r, signature=self._sign(digest)))

    def send_delta(self, run_id: str, old: EmbeddingTable) -> None:
        keys, values, removed = old.diff(self.tables[run_id])
        if len(keys) or len(removed):
            self.send_snapshot(run_id, full=False, keys=keys, values=values, removed=removed)
            log.info("%s: sent a delta of %s: %d changed, %d removed", self.me, run_id, len(keys), len(removed))

    def _sign(self, digest: bytes) -> np.ndarray:
        from vsplit.serve.signing import sign

        return np.frombuffer(sign(resolve(self.config, self.config.network.key), digest), dtype=np.uint8).copy()

    def close(self) -> None:
        self.stop.set()
        if self.explainer is not None:
            self.explainer.close()

