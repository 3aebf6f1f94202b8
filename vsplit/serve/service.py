"""The bank's scoring service without HTTP: partner links, a bounded queue and micro-batching workers.

Theory of operation. Each HTTP request becomes one job (its rows) on a bounded queue (``serve.max_queue`` rows
waiting at most; beyond that a request is refused at once with :class:`Overloaded`, never queued without bound).
``serve.workers`` threads each take the oldest job and every job waiting behind it up to ``serve.max_batch`` rows,
score them as one micro-batch (:meth:`~vsplit.serve.scorer.Scorer.score`: one request per partner for the whole
batch in live mode) and resolve each job's future. While one batch waits for the partners, the next requests queue
up, so under load batches grow and the cost per row falls. :meth:`BankService.close` stops taking new jobs, lets
the workers drain the queue, then closes the links.

Example (not run: needs a trained run and its partners):
    >>> # service = BankService(load_config("parties/bank/party.toml")); service.start()
    >>> # service.submit([Row(id="42", features={"age": 41})]).result()
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from vsplit.config import PartyConfig, resolve
from vsplit.errors import VsplitError
from vsplit.serve.links import LinkListener, PartnerDown
from vsplit.serve.metrics import SIZES, Metrics
from vsplit.serve.scorer import Row, Scored, Scorer

log = logging.getLogger(__name__)


class Overloaded(VsplitError):
    """The queue is full (``serve.max_queue``) or the service is shutting down: try again later."""


class BankService:
    """The bank's scoring service (see the module docstring); ``run_id``: the version to start with."""

    def __init__(self, config: PartyConfig, *, run_id: str | None = None) -> None:
        self.config = config
        self.scorer = Scorer(config, run_id=run_id)
        self.metrics = Metrics()
        s = config.serve
        self._queue: queue.Queue[tuple[list[Row], Future] | None] = queue.Queue()
        self._waiting = 0
        self._lock = threading.Lock()
        self._closing = False
        self._workers: list[threading.Thread] = []
        self.listener: LinkListener | None = None
        self.max_batch, self.max_queue = s.max_batch, s.max_queue
        self.metrics.gauge("vsplit_serve_partner_up", "1 if the partner is connected (cached: or its snapshot held)",
                           lambda: {(("party", p),): float(v in ("connected", "cached"))
                                    for p, v in self.scorer.partner_status().items()})
        self.metrics.gauge("vsplit_serve_queue_rows", "rows waiting to be scored",
                           lambda: {(): float(self._waiting)})
        self.metrics.gauge("vsplit_serve_refused_connections", "serving connections refused (strangers, bad "
                           "certificates)", lambda: {(): float(self.listener.refused if self.listener else 0)})
        self.metrics.gauge("vsplit_serve_frames_sent", "serving frames the bank sent, by partner and message type",
                           self._frames)

    def _frames(self) -> dict[tuple, float]:
        out: dict[tuple, float] = {}
        for name, link in list(self.scorer.links.items()):
            for kind, n in link.wire.sent.items():
                out[(("party", name), ("type", kind))] = float(n)
        return out

    # -- links -------------------------------------------------------------------------------------------------------
    def listen(self) -> tuple[str, int]:
        """Listen for the partner daemons (``serve.address``, default ``network.listen``); the bound address."""
        from vsplit.node.links import admission_policy, parse_address
        from vsplit.transport.connect import Listener
        from vsplit.transport.pinning import Credentials
        from vsplit.transport.stream import ChannelOptions

        net, me = self.config.network, self.config.party.name
        address = self.config.serve.address or net.listen
        if not address:
            from vsplit.errors import ConfigError

            raise ConfigError(f"serve.address: {me} listens for its partners' daemons; set e.g. "
                              "address = \"0.0.0.0:7800\" (or network.listen)")
        creds = Credentials.load(me, own_cert=resolve(self.config, net.cert), own_key=resolve(self.config, net.key),
                                 peers={p: resolve(self.config, c) for p, c in net.peers.items()})
        listener = Listener(creds, address=parse_address(address, key="serve.address"),
                            options=ChannelOptions(max_frame=net.max_frame_mb << 20),
                            admission=admission_policy(self.config))
        self.listener = LinkListener(listener, me=me, admit=self.scorer.admit, connected=self.scorer.connected,
                                     on_message=self.scorer.on_message)
        return self.listener.address

    def start(self) -> None:
        """Start the workers (and listen for partners, unless :meth:`listen` was called)."""
        if self.listener is None:
            self.listen()
        for i in range(self.config.serve.workers):
            worker = threading.Thread(target=self._work, name=f"vsplit-serve-worker-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)

    # -- jobs --------------------------------------------------------------------------------------------------------
    def submit(self, rows: Sequence[Row]) -> Future:
        """Queue ``rows`` for scoring; a future of their :class:`Scored` answers. :class:`Overloaded` if full."""
        future: Future = Future()
        with self._lock:
            if self._closing:
                raise Overloaded("the service is shutting down")
            if self._waiting + len(rows) > self.max_queue:
                raise Overloaded(f"{self._waiting} rows are waiting (serve.max_queue = {self.max_queue})")
            self._waiting += len(rows)
        self._queue.put((list(rows), future))
        return future

    def _work(self) -> None:
        held: tuple[list[Row], Future] | None = None
        while True:
            first = held if held is not None else self._queue.get()
            held = None
            if first is None:
                self._queue.put(None)  # wake the next worker too
                return
            jobs, n = [first], len(first[0])
            while n < self.max_batch:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self._queue.put(None)
                    break
                if n + len(job[0]) > self.max_batch:
                    held = job  # the next batch starts with it
                    break
                jobs.append(job)
                n += len(job[0])
            self._run(jobs, n)

    def _run(self, jobs: list[tuple[list[Row], Future]], n: int) -> None:
        with self._lock:
            self._waiting -= n
        rows = [r for job, _ in jobs for r in job]
        started = time.perf_counter()
        try:
            scored = self.scorer.score(rows)
        except PartnerDown as exc:
            self.metrics.count("vsplit_serve_partner_down_total", party=exc.party)
            for _, future in jobs:
                future.set_exception(exc)
            return
        except Exception as exc:  # one bad batch fails its own requests, never the service
            log.exception("scoring a batch of %d rows failed", n)
            for _, future in jobs:
                future.set_exception(exc)
            return
        self.metrics.observe("vsplit_serve_batch_rows", n, bounds=SIZES)
        self.metrics.observe("vsplit_serve_batch_seconds", time.perf_counter() - started)
        at = 0
        for job, future in jobs:
            part: list[Scored] = scored[at:at + len(job)]
            at += len(job)
            for s in part:
                self.metrics.count("vsplit_serve_scores_total", model=s.model or "none")
            future.set_result(part)

    def close(self, *, drain_s: float | None = None) -> None:
        """Stop taking jobs, score those queued (at most ``drain_s`` seconds), close the partners' links."""
        with self._lock:
            self._closing = True
        self._queue.put(None)
        deadline = time.monotonic() + (self.config.serve.drain_s if drain_s is None else drain_s)
        for worker in self._workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.listener is not None:
            self.listener.close()
        for link in list(self.scorer.links.values()):
            link.close()

    def status(self) -> dict[str, Any]:
        partners = self.scorer.partner_status()
        ok = all(v in ("connected", "cached") for v in partners.values())
        return {"status": "ok" if ok else "degraded", "mode": self.scorer.mode, "version": self.scorer.active,
                "partners": partners}
