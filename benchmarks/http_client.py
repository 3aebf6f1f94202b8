"""A lean HTTP/1.1 load client for the serving benchmark: keep-alive connections over asyncio, prebuilt requests.

The load generator shares the 2 cores with the bank and the partner, so what it spends per request is taken from
the service. aiohttp's client costs a few hundred microseconds of CPU per request (headers objects, cookie jar,
response objects); this one writes a request prebuilt as bytes and reads the answer with one status-line and
``Content-Length`` parse, on an asyncio :class:`~asyncio.Protocol`. It is still a real HTTP client on a real socket:
every request crosses loopback TCP and the server parses it as any other.

Example (not run: needs a server):
    >>> # conn = await Connection.open("127.0.0.1", 8000)
    >>> # status, body = await conn.send(post("127.0.0.1:8000", "/v1/score", b'{"id": "1", "features": {}}'))
"""

from __future__ import annotations

import asyncio


def post(host: str, path: str, body: bytes) -> bytes:
    """The bytes of ``POST path`` with a JSON ``body``, ready to write on a keep-alive connection."""
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request at a time (:meth:`send`)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(cls, host, port)
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        head = bytes(self.buffer[:end]).lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            self._fail(ConnectionError("an answer without Content-Length"))
            return
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + 17:stop if stop > 0 else len(head)])
        if len(self.buffer) < end + 4 + length:
            return
        status = int(head[9:12])
        body = bytes(self.buffer[end + 4:end + 4 + length])
        del self.buffer[:end + 4 + length]
        waiter, self.waiter = self.waiter, None
        if not waiter.done():
            waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("the server closed the connection"))

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Write ``request`` (from :func:`post`); the answer's status and body."""
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
