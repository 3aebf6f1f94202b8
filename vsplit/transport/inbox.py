"""Received frames waiting for ``recv``: a FIFO bounded by the bytes it holds, without a thread of its own.

Theory of operation. Whoever reads a socket (the caller of ``recv`` itself, or a channel's background reader while
nobody calls ``recv``) appends what it opened here, and ``recv`` takes from the front. Appending never blocks, so
the thread that reads is never stuck holding the socket: instead the *reader asks first* (:attr:`Inbox.full`) and
reads nothing more while the inbox is full, and TCP flow control slows the peer down. One read can complete several
frames; those that do not fit wait behind the queue (``held``, at most what one read produced) and move in as the
caller takes frames, so :attr:`Inbox.nbytes` never passes ``limit`` (one frame always fits). Failures queue after
the frames that preceded them.

Example:
    >>> box = Inbox(limit=4)
    >>> box.put(bytearray(b"abc")); box.put(bytearray(b"de")); box.full, box.nbytes
    (True, 3)
    >>> bytes(box.take()), box.nbytes, bytes(box.take()), box.take() is None
    (b'abc', 2, b'de', True)
"""

from __future__ import annotations

import threading
import time
from collections import deque

Item = bytearray | BaseException


class Inbox:
    """A FIFO of received frames and failures, bounded by the bytes it holds (one frame always fits)."""

    def __init__(self, limit: int) -> None:
        self._items: deque[Item] = deque()
        self._held: deque[Item] = deque()  # completed by a read while the queue was full: moved in as room frees
        self._limit = limit
        self.nbytes = 0
        self._cond = threading.Condition()

    @property
    def full(self) -> bool:
        """True while a reader should read no more (the caller is behind)."""
        return bool(self._held) or self.nbytes >= self._limit

    def put(self, item: Item) -> None:
        """Append ``item`` at once (behind the queue if it does not fit) and wake a caller waiting in :meth:`get`."""
        with self._cond:
            if self._held or not self._fits(item):
                self._held.append(item)
            else:
                self._admit(item)
            self._cond.notify_all()

    def take(self) -> Item | None:
        """The oldest item, or None if none is waiting (never blocks)."""
        with self._cond:
            return self._pop() if self._items else None

    def get(self, timeout: float | None) -> Item | None:
        """The oldest item, waiting up to ``timeout`` seconds for one (None: forever); None if none came."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._items:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return self._pop()

    def __len__(self) -> int:
        return len(self._items) + len(self._held)

    def _fits(self, item: Item) -> bool:
        return not isinstance(item, bytearray) or not self.nbytes or self.nbytes + len(item) <= self._limit

    def _admit(self, item: Item) -> None:
        self._items.append(item)
        if isinstance(item, bytearray):
            self.nbytes += len(item)

    def _pop(self) -> Item:
        item = self._items.popleft()
        if isinstance(item, bytearray):
            self.nbytes -= len(item)
        while self._held and self._fits(self._held[0]):
            self._admit(self._held.popleft())
        return item


def unwrap(item: Item) -> bytearray:
    """The frame, or raise the failure (a fresh copy, so each raise has its own traceback)."""
    if isinstance(item, BaseException):
        raise type(item)(str(item))
    return item


__all__ = ["Inbox", "Item", "unwrap"]
