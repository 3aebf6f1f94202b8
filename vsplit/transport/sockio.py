"""Writing on a non-blocking socket with a deadline, shared by the record layers of :mod:`vsplit.transport.stream`.

A channel's socket is non-blocking so that a reader and a writer in two threads never wait inside one call that
holds a lock: a layer tries to write, and when the socket's buffer is full it waits for room without its lock
(:func:`send_all`).

Example:
    >>> import socket
    >>> a, b = socket.socketpair()
    >>> a.setblocking(False)
    >>> send_all(a.send, a, b"hello", timeout=1.0)
    >>> b.recv(5)
    b'hello'
    >>> a.close(); b.close()
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable

#: How long a writer that OpenSSL told to read first waits before it tries again (TLS 1.3 almost never asks).
_RETRY_S = 0.001


def send_all(send: Callable[[bytes | bytearray | memoryview], int | None], sock: socket.socket,
             data: bytes | bytearray | memoryview, *, timeout: float) -> None:
    """Write all of ``data`` with ``send`` (bytes taken, or ``None``/0 while ``sock`` has no room), waiting for room
    at most ``timeout`` seconds in all; :class:`TimeoutError` past that (the peer stopped reading)."""
    view, end = data, None
    while len(view):
        try:
            n = send(view)  # the socket usually takes it all at once
        except (BlockingIOError, InterruptedError):
            n = 0
        if n:
            view = memoryview(view).cast("B")[n:]
            continue
        if end is None:  # the clock starts at the first wait
            end = time.monotonic() + timeout
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"could not send it all within {timeout} s")
        if n is None:  # the layer must read before it can write: look again shortly
            time.sleep(min(_RETRY_S, left))
        else:
            wait_writable(sock, left)


def wait_writable(sock: socket.socket, seconds: float) -> None:
    """Wait up to ``seconds`` until ``sock`` has room to write (or has failed)."""
    if hasattr(select, "poll"):  # any descriptor number, unlike select()
        poller = select.poll()
        poller.register(sock, select.POLLOUT)
        poller.poll(seconds * 1000)
    else:
        select.select((), (sock,), (), seconds)


__all__ = ["send_all", "wait_writable"]
