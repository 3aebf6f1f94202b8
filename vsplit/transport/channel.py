"""The channel interface: a reliable, ordered, point-to-point pipe of whole frames.

Two implementations share it: :class:`vsplit.transport.memory.MemoryChannel` (one process: notebooks, tests) and
the mutual-TLS socket channel (one party per process or host). Protocol code never sees which one it runs on.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Protocol, TypeVar

from vsplit.errors import TransportError

T = TypeVar("T")


class Channel(Protocol):
    """A pipe to one peer. ``recv`` returns one whole frame, or raises on timeout or close."""

    def send(self, frame: bytes) -> None:
        """Send one frame."""

    def recv(self, timeout: float | None) -> bytes | bytearray:
        """Return the next frame; raise :class:`~vsplit.errors.TransportError` after ``timeout`` seconds.

        ``timeout=0`` polls: it raises :class:`TimeoutError`-flavoured ``TransportError`` at once when nothing waits.
        """

    def close(self) -> None:
        """Close the pipe; later calls raise."""


class NothingYet(Exception):
    """Raised by ``recv(timeout=0)`` when no frame is waiting (a poll, not an error)."""


class PeerLost(TransportError):
    """The peer vanished: its connection dropped without a clean close, was reset, or went silent.

    ``code`` is the abort code the other parties are told (``AbortCode.PEER_LOST``), so a partner of a hub learns
    that some party dropped out rather than that the hub timed out.
    """

    code = 11


class RecvTimeout(TransportError):
    """``recv`` found no frame within its (positive) timeout; the channel itself may be fine."""


class PeerClosed(TransportError):
    """The peer ended the channel cleanly (TLS ``close_notify``) after its last frame.

    Every frame it sent has been delivered before this is raised, so a peer that finished its part and closed is
    not a failure by itself: the pump (:mod:`vsplit.runtime.pump`) decides whether the machine still needed it.
    """


def take(get: Callable[[float | None], T], timeout: float | None, *, peer: str = "the peer") -> T:
    """Call ``get(timeout)`` (which raises :class:`queue.Empty`) with the channel semantics of ``recv``.

    ``timeout=0`` polls and raises :class:`NothingYet`; a positive timeout that runs out raises
    :class:`RecvTimeout` (a :class:`~vsplit.errors.TransportError`); ``None`` waits forever.

    >>> q = queue.SimpleQueue(); q.put(b"x")
    >>> take(lambda t: q.get(block=t != 0, timeout=t or None), 0)
    b'x'
    >>> take(lambda t: q.get(block=t != 0, timeout=t or None), 0)
    Traceback (most recent call last):
    ...
    vsplit.transport.channel.NothingYet
    """
    try:
        return get(timeout)
    except queue.Empty:
        if timeout == 0:
            raise NothingYet from None
        raise RecvTimeout(f"no frame from {peer} within {timeout} s") from None
