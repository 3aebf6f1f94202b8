"""The bank's scoring service without HTTP: partner links, a bounded queue and micro-batching on the event loop.

Theory of operation. Each HTTP request becomes one job (its rows) on a bounded queue (``serve.max_queue`` rows
waiting at most; beyond that a request is refused at once with :class:`Overloaded`, never queued without bound).
The queue lives on the HTTP server's event loop, like the requests: a job costs a list append and a future, no
thread hop. Once per loop turn the service starts the next micro-batch (the oldest job and every job waiting behind
it, up to ``serve.max_batch`` rows) while fewer than ``serve.workers`` batches are in flight, and scores it
(:meth:`~vsplit.serve.scorer.Scorer.score_async`: in live mode one request per partner for the whole batch, whose
answers are awaited, so the loop keeps taking requests meanwhile; in cached mode a lookup and one forward pass).
Under load, requests arriving while batches are in flight wait together, so batches grow and the cost per row
falls; one request alone is scored at once. :meth:`BankService.drain` stops taking new jobs and scores those
queued; :meth:`BankService.close` closes the links.

Example (not run: needs a trained run and its partners):
    >>> # service = BankService(load_config("parties/bank/party.toml")); service.start()
    >>> # await service.submit([Row(id="42", features={"age": 41})])
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Sequence
from typing import Any

from vsplit.config import PartyConfig, resolve
from vsplit.errors import VsplitError
from vsplit.serve.links import LinkListener, PartnerDown
from vsplit.serve.metrics import SIZES, Metrics
from vsplit.serve.scorer import Row, Scorer

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
        self._jobs: collections.deque[tuple[list[Row], asyncio.Future]] = collections.deque()
        self._waiting = 0  # rows queued, not yet in a batch
        self._inflight = 0  # batches being scored
        self._scheduled = self._started = self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        self._idle = asyncio.Event()
        self.workers = s.workers
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
        """Start scoring queued jobs (and listen for partners, unless :meth:`listen` was called)."""
        if self.listener is None:
            self.listen()
        self._started = True
        if self._jobs and self._loop is not None:
            self._loop.call_soon_threadsafe(self._next)

    # -- jobs --------------------------------------------------------------------------------------------------------
    def submit(self, rows: Sequence[Row]) -> asyncio.Future:
        """Queue ``rows`` for scoring (on the running event loop); a future of their :class:`Scored` answers.
        :class:`Overloaded` if the queue is full or the service is closing."""
        if self._closing:
            raise Overloaded("the service is shutting down")
        if self._waiting + len(rows) > self.max_queue:
            raise Overloaded(f"{self._waiting} rows are waiting (serve.max_queue = {self.max_queue})")
        loop = self._loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.append((list(rows), future))
        self._waiting += len(rows)
        if not self._scheduled:
            self._scheduled = True  # one start per loop turn: the jobs of this turn batch together
            loop.call_soon(self._next)
        return future

    def _next(self) -> None:
        self._scheduled = False
        while self._started and self._jobs and self._inflight < self.workers:
            jobs, n = [self._jobs.popleft()], 0
            n = len(jobs[0][0])
            while self._jobs and n + len(self._jobs[0][0]) <= self.max_batch:
                job = self._jobs.popleft()
                jobs.append(job)
                n += len(job[0])
            self._waiting -= n
            self._inflight += 1
            task = asyncio.get_running_loop().create_task(self._run(jobs, n))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, jobs: list[tuple[list[Row], asyncio.Future]], n: int) -> None:
        rows = jobs[0][0] if len(jobs) == 1 else [r for job, _ in jobs for r in job]
        started = time.perf_counter()
        try:
            scored = await self.scorer.score_async(rows)
        except PartnerDown as exc:
            self.metrics.count("vsplit_serve_partner_down_total", party=exc.party)
            _fail(jobs, exc)
            return
        except Exception as exc:  # one bad batch fails its own requests, never the service
            log.exception("scoring a batch of %d rows failed", n)
            _fail(jobs, exc)
            return
        finally:
            self._inflight -= 1
            if self._jobs:
                self._next()
            elif self._closing and not self._inflight:
                self._idle.set()
        self.metrics.observe("vsplit_serve_batch_rows", n, bounds=SIZES)
        self.metrics.observe("vsplit_serve_batch_seconds", time.perf_counter() - started)
        models = collections.Counter(s.model or "none" for s in scored)
        for model, count in models.items():
            self.metrics.count("vsplit_serve_scores_total", count, model=model)
        at = 0
        for job, future in jobs:
            if not future.done():  # its client may have given up (timeout, disconnect)
                future.set_result(scored[at:at + len(job)])
            at += len(job)

    async def drain(self, *, drain_s: float | None = None) -> None:
        """Stop taking jobs and score those queued or in flight (at most ``drain_s`` seconds)."""
        self._closing = True
        if not self._jobs and not self._inflight:
            return
        self._idle.clear()
        try:
            await asyncio.wait_for(self._idle.wait(), self.config.serve.drain_s if drain_s is None else drain_s)
        except asyncio.TimeoutError:
            log.warning("%d rows still queued after draining for %g s", self._waiting, self.config.serve.drain_s)

    def close(self) -> None:
        """Stop taking jobs and close the partners' links (after :meth:`drain`, when a loop runs)."""
        self._closing = True
        if self.listener is not None:
            self.listener.close()
        for link in list(self.scorer.links.values()):
            link.close()

    def status(self) -> dict[str, Any]:
        partners = self.scorer.partner_status()
        ok = all(v in ("connected", "cached") for v in partners.values())
        return {"status": "ok" if ok else "degraded", "mode": self.scorer.mode, "version": self.scorer.active,
                "partners": partners}


def _fail(jobs: list[tuple[list[Row], asyncio.Future]], exc: BaseException) -> None:
    for _, future in jobs:
        if not future.done():
            future.set_exception(exc)
