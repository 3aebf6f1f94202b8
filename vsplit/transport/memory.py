"""An in-memory channel: a pair of queues joining two parties in one process.

Frames still go through the codec, so an in-process run exercises exactly the bytes a network run would send.

Example:
    >>> bank, partner = memory_pair()
    >>> partner.send(b"frame")
    >>> bytes(bank.recv(timeout=0))
    b'frame'
"""

from __future__ import annotations

import queue

from vsplit.errors import TransportError
from vsplit.transport.channel import PeerClosed, take

_CLOSED = object()


class MemoryChannel:
    """One end of an in-memory pipe; build pairs with :func:`memory_pair`."""

    def __init__(self, inbox: queue.SimpleQueue, outbox: queue.SimpleQueue) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._closed = False

    def send(self, frame: bytes) -> None:
        if self._closed:
            raise TransportError("channel is closed")
        self._outbox.put(frame)

    def recv(self, timeout: float | None) -> bytes:
        if self._closed:
            raise TransportError("channel is closed")
        item = take(self._get, timeout)
        if item is _CLOSED:
            self._closed = True
            raise PeerClosed("the peer closed the channel")
        return item

    def _get(self, timeout: float | None) -> bytes:
        return self._inbox.get(block=timeout != 0, timeout=timeout or None)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._outbox.put(_CLOSED)


def memory_pair() -> tuple[MemoryChannel, MemoryChannel]:
    """Two joined channel ends: what one sends, the other receives."""
    a_to_b: queue.SimpleQueue = queue.SimpleQueue()
    b_to_a: queue.SimpleQueue = queue.SimpleQueue()
    return MemoryChannel(b_to_a, a_to_b), MemoryChannel(a_to_b, b_to_a)
