"""The bank's HTTP front: uvicorn's httptools protocol with limits that hold against a hostile client, no proxy needed.

Theory of operation. uvicorn hands each connection's bytes to httptools, which accepts any number and size of headers
and joins the pieces of a header value that arrives in many reads by repeated concatenation (quadratic, on the event
loop). :class:`Front` gathers a request head (request line and headers) itself, in a ``bytearray``, until its blank
line, and only then feeds it to the parser in one piece. A head above ``serve.max_header_kb`` or with more than
``serve.max_headers`` header lines is answered 431 and the connection closed. A head must arrive within
``serve.header_timeout_s`` (of its first byte, or of the connection for one that sends nothing), a body within
``serve.body_timeout_s`` of its head; past either deadline the connection is closed (408 when no request is in
flight). :class:`Connections` keeps the open connections in order of arrival: at ``serve.max_connections`` the
oldest with no request in flight (idle between requests, or still sending its head) is closed to make room, so idle
connections never lock a client out. Every drop is counted (``vsplit_serve_dropped_connections_total``) and logged,
one line at most every ``LOG_EVERY_S`` seconds.

A whole request in one read (the scoring hot path) costs a search for the blank line and a count of line ends.

Example:
    >>> limits = Limits(max_head=16 * 1024, max_headers=100, header_timeout_s=10, body_timeout_s=30,
    ...                 max_connections=512)
    >>> protocol = front_protocol(limits, Connections(limits))
    >>> issubclass(protocol, Front), protocol.limits.max_headers
    (True, 100)
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

log = logging.getLogger("vsplit.serve.front")

#: drops are logged at most once per this many seconds (counted in /metrics all the time)
LOG_EVERY_S = 10.0
#: seconds a refused connection is read (and what it sends dropped) before it is closed
LINGER_S = 2.0
#: where a connection is in its current request
IDLE, HEAD, BODY, CLOSED = range(4)


@dataclass(frozen=True)
class Limits:
    """The front's limits (``serve.max_header_kb`` ... ``serve.max_connections``), ``max_head`` in bytes."""

    max_head: int
    max_headers: int
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int

    @classmethod
    def of(cls, serve: Any) -> Limits:
        """The limits of a ``[serve]`` section."""
        return cls(max_head=serve.max_header_kb * 1024, max_headers=serve.max_headers,
                   header_timeout_s=serve.header_timeout_s, body_timeout_s=serve.body_timeout_s,
                   max_connections=serve.max_connections)


class Connections:
    """The open connections in order of arrival, the connection cap, and the drops (counted, logged rate-limited)."""

    def __init__(self, limits: Limits, *, metrics: Any = None) -> None:
        self.limits, self.metrics = limits, metrics
        self.open: dict[Front, None] = {}  # insertion order: the oldest first
        self.dropped: Counter[str] = Counter()
        self._unlogged: Counter[str] = Counter()
        self._logged_at = 0.0

    def admit(self, conn: Front) -> bool:
        """Take ``conn`` in, closing the oldest connection with no request in flight if the cap is reached; False if
        every open connection has a request in flight (``conn`` is then refused)."""
        if len(self.open) >= self.limits.max_connections:
            victim = next((c for c in self.open if c.idle), None)
            if victim is None:
                return False
            self.drop(victim, "max_connections")
        self.open[conn] = None
        return True

    def forget(self, conn: Front) -> None:
        self.open.pop(conn, None)

    def drop(self, conn: Front, reason: str, *, answer: bytes | None = None) -> None:
        """Close ``conn`` (after writing ``answer``, a whole HTTP response, if given) and count it under ``reason``."""
        conn.close(answer)
        self.note(reason)

    def note(self, reason: str) -> None:
        self.dropped[reason] += 1
        self._unlogged[reason] += 1
        if self.metrics is not None:
            self.metrics.count("vsplit_serve_dropped_connections_total", reason=reason)
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            counts = ", ".join(f"{n} {r}" for r, n in sorted(self._unlogged.items()))
            log.warning("HTTP front closed connections (%s) since the last report; see docs/serving.md, \"Limits\"",
                        counts)
            self._unlogged.clear()
            self._logged_at = now


def refusal(status: int, code: str, message: str) -> bytes:
    """A whole HTTP response with the API's JSON error body, closing the connection."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return b"".join([STATUS_LINE[status], b"content-type: application/json\r\ncontent-length: ",
                     str(len(body)).encode(), b"\r\nconnection: close\r\n\r\n", body])


class Front(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of :class:`Limits` (see the module docstring); made per server
    by :func:`front_protocol`, which sets ``limits`` and ``registry``."""

    limits: Limits
    registry: Connections

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = IDLE
        self._head = bytearray()
        self._fed = 0  # bytes at the start of ``_head`` the parser already has (a pipelined head's start)
        self._timer: asyncio.TimerHandle | None = None

    # -- connections -------------------------------------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.registry.admit(self):
            self.registry.note("busy")
            self.close(refusal(503, "busy", "every connection has a request in flight (serve.max_connections); "
                                            "retry shortly"))
            return
        self._arm(self.limits.header_timeout_s, "header_timeout")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._phase = CLOSED
        self.registry.forget(self)
        super().connection_lost(exc)

    @property
    def idle(self) -> bool:
        """No request in flight: between requests (keep-alive), still sending a head, or refused and lingering."""
        if self.transport.is_closing():
            return False
        return self._phase == CLOSED or (self._phase in (IDLE, HEAD) and not self.pipeline
                                         and (self.cycle is None or self.cycle.response_complete))

    def close(self, answer: bytes | None = None) -> None:
        """Close the connection; after ``answer``, lingering: the answer, then the end of our stream, then what the
        client still sends read and dropped for ``LINGER_S`` (so a client still sending reads the answer instead of
        a reset), then closed."""
        self._phase = CLOSED
        self._disarm()
        if self.transport.is_closing():
            return
        if answer and self.transport.can_write_eof():
            self.transport.write(answer)
            self.transport.write_eof()
            self._timer = self.loop.call_later(LINGER_S, self.transport.close)
            return
        if answer:
            self.transport.write(answer)
        self.transport.close()

    # -- bytes in ----------------------------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._phase == BODY:
            super().data_received(data)
            return
        if self._phase == CLOSED:
            return
        head = self._head
        if head:  # a head that came in pieces: gathered (a bytearray grows in place, linear)
            start = max(0, len(head) - 3)
            head += data
            buffer: bytes | bytearray = head
        else:  # the usual case: a whole head in one read, searched where it lies
            start, buffer = 0, data
        end = buffer.find(b"\r\n\r\n", start)
        if end < 0:
            if len(buffer) - self._fed > self.limits.max_head:
                self._too_large()
                return
            self._unset_keepalive_if_required()  # a head in pieces: the keep-alive wait ends with its first one
            if not head:
                self._head = bytearray(data)
            if self._timer is None:
                self._arm(self.limits.header_timeout_s, "header_timeout")
            return
        end += 4
        if end - self._fed > self.limits.max_head or buffer.count(b"\n", self._fed, end) - 2 > self.limits.max_headers:
            self._too_large()
            return
        chunk = buffer[self._fed:] if self._fed else buffer
        if head:
            self._head, self._fed = bytearray(), 0
        self._disarm()
        super().data_received(chunk)  # the whole head (and what followed it) in one piece
        if self._phase == BODY:
            self._arm(self.limits.body_timeout_s, "body_timeout")
        elif self._phase == HEAD:  # a pipelined request began in the same read: gather the rest of its head
            self._head = bytearray(chunk[-3:])
            self._fed = len(self._head)

    def _too_large(self) -> None:
        self.registry.drop(self, "header_too_large", answer=refusal(
            431, "header_too_large", f"the request head is over {self.limits.max_head // 1024} KiB or "
            f"{self.limits.max_headers} header lines (serve.max_header_kb, serve.max_headers)"))

    # -- the parser's callbacks --------------------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._phase = HEAD
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._phase = BODY
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._phase = IDLE
        self._disarm()
        super().on_message_complete()

    # -- deadlines ---------------------------------------------------------------------------------------------------
    def _arm(self, seconds: float, reason: str) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._expired, reason)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self, reason: str) -> None:
        self._timer = None
        if self._phase == CLOSED or self.transport.is_closing():
            return
        if reason == "header_timeout" and not self.idle:  # a response still on its way: its client is not slow
            self._arm(self.limits.header_timeout_s, reason)
            return
        answer = None
        if self.idle:
            answer = refusal(408, "timeout", f"the request {'head' if reason == 'header_timeout' else 'body'} did "
                                             f"not arrive in time (serve.{reason}_s)")
        self.registry.drop(self, reason, answer=answer)  # a body in flight: the app sees the client go (499)


def front_protocol(limits: Limits, connections: Connections) -> type[Front]:
    """A :class:`Front` class for one server (uvicorn's ``http=``), sharing ``connections``."""
    return type("BankFront", (Front,), {"limits": limits, "registry": connections})
