"""The bank's side of its serving links: partner daemons connect over mutual TLS, say hello, and are asked.

Theory of operation. The bank listens on ``serve.address`` (default ``network.listen``) with the same listener as
training: TLS 1.3, pinned certificates, a stranger refused before it can send a frame (the refusals are counted in
``/metrics``). An authenticated partner says :class:`~vsplit.serve.messages.ServeHello`; the bank welcomes it only if
it holds that model version with the same pair digest. Each :class:`PartnerLink` then has one reader thread: replies
resolve the futures of the requests they answer, snapshots go to the cached-mode store. A link that drops fails its
waiting requests at once (``PartnerDown`` naming the partner), so no request waits for a dead partner.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from vsplit.errors import TransportError, VsplitError
from vsplit.serve import messages as m
from vsplit.serve.wire import Wire

log = logging.getLogger(__name__)


class PartnerDown(VsplitError):
    """A partner needed for a score is not connected, refused, or did not answer in time."""

    def __init__(self, party: str, why: str) -> None:
        super().__init__(f"partner {party!r} is unavailable: {why}")
        self.party = party


class PartnerLink:
    """One connected partner daemon: send requests, get futures of their replies."""

    def __init__(self, wire: Wire, *, on_message: Callable[[PartnerLink, Any], None]) -> None:
        self.wire = wire
        self.name = wire.peer
        self._ids = itertools.count(1)
        self._pending: dict[int, Future] = {}
        self._versions: dict[str, Future] = {}
        self._explaining: dict[int, queue.Queue] = {}  # explanation request -> its inbox of (partner, step)
        self._lock = threading.Lock()
        self._on_message = on_message
        #: called once with this link when it drops or is closed (the scorer forgets its incomplete snapshots)
        self.on_close: Callable[[PartnerLink], None] | None = None
        self.alive = True
        self._reader = threading.Thread(target=self._read, name=f"vsplit-serve-{self.name}", daemon=True)
        self._reader.start()

    def embed(self, run_id: str, keys: np.ndarray) -> Future:
        """Ask for the embeddings of ``keys`` under model ``run_id``; a future of the :class:`EmbedReply`."""
        future: Future = Future()
        request = next(self._ids)
        with self._lock:
            if not self.alive:
                raise PartnerDown(self.name, "its link dropped")
            self._pending[request] = future
        try:
            self.wire.send(m.EmbedRequest(request=request, run_id=run_id, keys=keys))
        except TransportError as exc:
            self._fail(f"the link failed ({exc})")
        return future

    def explain(self, run_id: str, keys: np.ndarray, inbox: queue.Queue, *, network: int = 0) -> int:
        """Open an explanation of ``keys`` under model ``run_id`` (:class:`~vsplit.serve.messages.ExplainOpen`;
        ``network``: which network of an ensemble's bag); the partner's steps of it go to ``inbox`` as
        ``(partner, step)`` (``(partner, PartnerDown)`` if the link drops); its request number, for
        :meth:`explain_step` and :meth:`end_explain`."""
        request = next(self._ids)
        with self._lock:
            if not self.alive:
                raise PartnerDown(self.name, "its link dropped")
            self._explaining[request] = inbox
        try:
            self.wire.send(m.ExplainOpen(request=request, run_id=run_id, keys=keys, network=network))
        except TransportError as exc:
            self._fail(f"the link failed ({exc})")
        return request

    def explain_step(self, step: m.ExplainStep) -> None:
        """Send one step of an explanation opened by :meth:`explain`."""
        try:
            self.wire.send(step)
        except TransportError as exc:
            self._fail(f"the link failed ({exc})")

    def end_explain(self, request: int) -> None:
        """Stop routing explanation ``request``'s steps (done, or abandoned: a late step is dropped)."""
        with self._lock:
            self._explaining.pop(request, None)

    def forget(self, future: Future) -> None:
        """Stop waiting for ``future`` (its request timed out); a late reply is dropped."""
        with self._lock:
            for key, value in list(self._pending.items()):
                if value is future:
                    del self._pending[key]

    def load_version(self, run_id: str) -> Future:
        """Ask the partner to load model ``run_id`` beside its others; a future of its :class:`VersionLoaded`."""
        future: Future = Future()
        with self._lock:
            if not self.alive:
                raise PartnerDown(self.name, "its link dropped")
            self._versions[run_id] = future
        self.wire.send(m.LoadVersion(run_id=run_id))
        return future

    def _read(self) -> None:
        try:
            while True:
                msg = self.wire.recv(None)
                if isinstance(msg, m.EmbedReply):
                    with self._lock:
                        future = self._pending.pop(msg.request, None)
                    if future is not None:
                        future.set_result(msg)
                elif isinstance(msg, m.VersionLoaded):
                    with self._lock:
                        future = self._versions.pop(msg.run_id, None)
                    if future is not None:
                        future.set_result(msg)
                elif isinstance(msg, m.ExplainStep):
                    with self._lock:
                        inbox = self._explaining.get(msg.request)
                    if inbox is not None:
                        inbox.put((self.name, msg))
                else:
                    self._on_message(self, msg)
        except (TransportError, VsplitError, OSError) as exc:
            self._fail(f"its link dropped ({exc})")
        except Exception as exc:  # a bug must not leave requests waiting
            log.exception("serving link to %s failed", self.name)
            self._fail(f"internal error ({type(exc).__name__})")

    def _fail(self, why: str) -> None:
        with self._lock:
            was_alive, self.alive = self.alive, False
            waiting = [*self._pending.values(), *self._versions.values()]
            inboxes = list(self._explaining.values())
            self._pending.clear()
            self._versions.clear()
            self._explaining.clear()
        for inbox in inboxes:
            inbox.put((self.name, PartnerDown(self.name, why)))
        for future in waiting:
            if not future.done():
                future.set_exception(PartnerDown(self.name, why))
        self.wire.close()
        if was_alive and self.on_close is not None:
            self.on_close(self)

    def close(self) -> None:
        self._fail("the bank closed the link")


class LinkListener:
    """The bank's listener for partner daemons; ``admit(wire, hello)`` decides each hello (a welcome or a refusal
    code) and ``connected(link)`` receives each admitted link."""

    def __init__(self, listener: Any, *, me: str, admit: Callable[[Any], m.ServeWelcome],
                 connected: Callable[[PartnerLink], None], on_message: Callable[[PartnerLink, Any], None],
                 hello_timeout_s: float = 10.0) -> None:
        from vsplit.serve.wire import serve_session

        self.listener = listener
        self.me = me
        self._session = serve_session
        self._admit, self._connected, self._on_message = admit, connected, on_message
        self.hello_timeout_s = hello_timeout_s
        listener.start_reception(self._welcome)

    @property
    def address(self) -> tuple[str, int]:
        return tuple(self.listener.address)  # type: ignore[return-value]

    @property
    def refused(self) -> int:
        """Connections refused so far (strangers, wrong certificates, plaintext, silent)."""
        return int(self.listener.refusals.total)

    def _welcome(self, conn: Any, addr: tuple, first: bytes) -> None:
        try:
            channel = self.listener.authenticate(conn, addr, first=first)
        except (TransportError, OSError) as exc:
            self.listener.refused(addr, exc if isinstance(exc, TransportError) else TransportError(str(exc)))
            return
        wire = Wire(channel, peer=channel.peer, session=self._session(self.me, channel.peer))
        try:
            hello = wire.recv(self.hello_timeout_s)
            if not isinstance(hello, m.ServeHello) or hello.party != channel.peer:
                raise TransportError(f"{channel.peer} did not say a serving hello")
            welcome = self._admit(hello)
            wire.send(welcome)
        except (TransportError, VsplitError) as exc:
            log.warning("%s: serving hello from %s failed: %s", self.me, channel.peer, exc)
            channel.close()
            return
        if not welcome.ok:
            log.warning("%s: refused %s's model %s: %s", self.me, hello.party, hello.run_id,
                        m.REFUSALS.get(welcome.code, welcome.code))
            channel.close()
            return
        self._connected(PartnerLink(wire, on_message=self._on_message))

    def close(self) -> None:
        self.listener.close()
