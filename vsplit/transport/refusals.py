"""Refused connections, logged at a bounded rate: a flood of strangers cannot fill the disk through the log.

Theory of operation. The first :data:`BURST` refusals of each interval of :data:`INTERVAL_S` seconds are logged one
line each, with their reason (a misconfigured partner is then easy to diagnose). Past that, refusals are only
counted, and one aggregate line per interval says how many there were, from how many source addresses (a few of
them named), and the last reason. The most recent refusals are kept (at most :data:`KEEP`) for error messages.

Example:
    >>> clock = iter([0.0, 0.1, 0.2, 0.3, 30.0]).__next__
    >>> lines = []
    >>> refusals = RefusalLog("bank", burst=2, interval_s=10, clock=clock, emit=lines.append)
    >>> for host in ("192.0.2.1", "192.0.2.2", "192.0.2.3"):
    ...     refusals.record(host, TransportError("sent no TLS record within 1.5 s"))
    >>> refusals.flush()
    >>> lines[-1]
    'bank: refused 1 more connection(s) in the last 30 s from 1 address(es) (192.0.2.3); the last because: sent no \
TLS record within 1.5 s'
    >>> refusals.total, len(lines)
    (3, 3)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from vsplit.errors import TransportError

log = logging.getLogger(__name__)

#: Refusals logged one line each per interval; the interval, in seconds; refusals kept for error messages.
BURST, INTERVAL_S, KEEP = 5, 10.0, 100
_SHOWN, _SOURCES = 5, 4096


class RefusalLog:
    """Counts refused connections and logs them at a bounded rate (see the module docstring); thread-safe."""

    def __init__(self, party: str, *, burst: int = BURST, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, emit: Callable[[str], None] | None = None) -> None:
        self.party = party
        self.burst, self.interval_s = burst, interval_s
        #: refusals since the start
        self.total = 0
        #: the most recent refusals, oldest first
        self.recent: deque[TransportError] = deque(maxlen=KEEP)
        self._clock = clock
        self._emit = emit if emit is not None else (lambda line: log.warning("%s", line))
        self._lock = threading.Lock()
        self._start = clock()
        self._logged = 0
        self._pending = 0
        self._sources: dict[str, None] = {}
        self._last = ""

    def record(self, source: str, reason: TransportError) -> None:
        """One refused connection from ``source``, with ``reason`` (its message names the connection)."""
        with self._lock:
            self.total += 1
            self.recent.append(reason)
            lines = [self._roll()]
            if self._logged < self.burst:
                self._logged += 1
                lines.append(f"{self.party}: refused a connection: {reason}")
            else:
                self._pending += 1
                if len(self._sources) < _SOURCES:
                    self._sources[source] = None
                self._last = str(reason)
        for line in lines:
            if line:
                self._emit(line)

    def flush(self, *, force: bool = False) -> None:
        """Write the aggregate line of the interval if it is over (or at once with ``force``)."""
        with self._lock:
            line = self._roll(force=force)
        if line:
            self._emit(line)

    def _roll(self, *, force: bool = False) -> str:  # under the lock
        now = self._clock()
        if now - self._start < self.interval_s and not force:
            return ""
        line = ""
        if self._pending:
            shown = ", ".join(list(self._sources)[:_SHOWN]) + (", ..." if len(self._sources) > _SHOWN else "")
            line = (f"{self.party}: refused {self._pending} more connection(s) in the last {now - self._start:.0f} s "
                    f"from {len(self._sources)}{'+' if len(self._sources) >= _SOURCES else ''} address(es) ({shown});"
                    f" the last because: {self._last}")
        self._start, self._logged, self._pending, self._sources = now, 0, 0, {}
        return line


__all__ = ["BURST", "INTERVAL_S", "KEEP", "RefusalLog"]
