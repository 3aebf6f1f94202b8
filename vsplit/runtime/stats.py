"""Communication accounting: frames and bytes sent and received, per peer and per message type.

Example:
    >>> stats = CommStats()
    >>> stats.record("sent", "partner", "Gradients", 1024)
    >>> stats.total("sent")
    1024
    >>> stats.as_dict()["sent"]["Gradients"]
    {'frames': 1, 'bytes': 1024}
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class _Tally:
    frames: int = 0
    bytes: int = 0


@dataclass
class CommStats:
    """Counts of what one party sent and received."""

    _by: dict[tuple[str, str, str], _Tally] = field(default_factory=lambda: defaultdict(_Tally))

    def record(self, direction: str, peer: str, kind: str, nbytes: int) -> None:
        """Count one frame of ``nbytes`` bytes of message type ``kind`` to or from ``peer``."""
        tally = self._by[(direction, peer, kind)]
        tally.frames += 1
        tally.bytes += nbytes

    def merge(self, other: CommStats) -> None:
        """Add ``other``'s counts to these (one party's stats over several stages' channels)."""
        for key, tally in other._by.items():
            mine = self._by[key]
            mine.frames += tally.frames
            mine.bytes += tally.bytes

    def total(self, direction: str, *, peer: str | None = None, kind: str | None = None) -> int:
        """Total bytes in ``direction`` ("sent" or "received"), optionally for one peer or message type."""
        return sum(
            t.bytes
            for (d, p, k), t in self._by.items()
            if d == direction and (peer is None or p == peer) and (kind is None or k == kind)
        )

    def frames(self, direction: str) -> int:
        """Total frames in ``direction``."""
        return sum(t.frames for (d, _, _), t in self._by.items() if d == direction)

    def tallies(self) -> list[tuple[str, str, str, int, int]]:
        """Every count as ``(direction, peer, message type, frames, bytes)`` (a console reads them while the pump
        counts: a new key added meanwhile raises ``RuntimeError``, to be read again)."""
        return [(d, p, k, t.frames, t.bytes) for (d, p, k), t in list(self._by.items())]

    def as_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        """``{"sent"|"received": {message type: {"frames", "bytes"}}}`` plus ``"by_peer"`` byte totals."""
        out: dict[str, dict] = {"sent": {}, "received": {}, "by_peer": {}}
        for (direction, peer, kind), tally in sorted(self._by.items()):
            slot = out[direction].setdefault(kind, {"frames": 0, "bytes": 0})
            slot["frames"] += tally.frames
            slot["bytes"] += tally.bytes
            by_peer = out["by_peer"].setdefault(peer, {"sent": 0, "received": 0})
            by_peer[direction] += tally.bytes
        return out
