"""The channel interface: a reliable, ordered, point-to-point pipe of whole frames.

Two implementations share it: :class:`vsplit.transport.memory.MemoryChannel` (one process: notebooks, tests) and
the mutual-TLS socket channel (one party per process or host). Protocol code never sees which one it runs on.
"""

from __future__ import annotations

from typing import Protocol


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
