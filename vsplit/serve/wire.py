"""One serving link's frames: serve messages encoded by the codec over a mutual-TLS channel, counted by type.

The bank and a partner share a serving session id (:func:`serve_session`); a frame of another session is refused.
Every frame sent and received is counted by message type, so ``/metrics`` and the tests can say exactly what crossed.

Example:
    >>> from vsplit.transport.memory import memory_pair
    >>> from vsplit.serve.messages import LoadVersion
    >>> a, b = memory_pair()
    >>> left, right = Wire(a, peer="partner", session=serve_session("bank", "partner")), \\
    ...     Wire(b, peer="bank", session=serve_session("bank", "partner"))
    >>> left.send(LoadVersion(run_id="v2")); right.recv(1.0).run_id
    'v2'
    >>> dict(left.sent)
    {'LoadVersion': 1}
"""

from __future__ import annotations

import collections
import hashlib
import threading
from typing import Any

from vsplit.errors import ProtocolError
from vsplit.protocol.message import Message
from vsplit.transport import codec


def serve_session(bank: str, partner: str) -> bytes:
    """The 16-byte session id of the serving link between ``bank`` and ``partner``."""
    return hashlib.sha256(f"vsplit-serve-session:{bank}:{partner}".encode()).digest()[:16]


class Wire:
    """Messages over ``channel`` to ``peer``: :meth:`send` (thread-safe) and :meth:`recv` (one reader)."""

    def __init__(self, channel: Any, *, peer: str, session: bytes) -> None:
        self.channel, self.peer, self.session = channel, peer, session
        self._lock = threading.Lock()
        self._seq = 0
        self.sent: collections.Counter[str] = collections.Counter()
        self.received: collections.Counter[str] = collections.Counter()

    def send(self, msg: Message) -> None:
        with self._lock:
            frame = codec.encode(msg, session=self.session, seq=self._seq)
            self._seq += 1
            self.channel.send(frame)
            self.sent[type(msg).__name__] += 1

    def recv(self, timeout: float | None) -> Message:
        frame = self.channel.recv(timeout)
        header, msg = codec.decode(frame)  # never unpickle peer data: the codec builds only registered dataclasses
        if header.session != self.session:
            raise ProtocolError(f"{self.peer!r} sent a frame of another session; refused")
        self.received[type(msg).__name__] += 1
        return msg

    def close(self) -> None:
        self.channel.close()
