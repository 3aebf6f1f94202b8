"""What a PSI run gives each party: its rows of the shared records in the agreed order, and run statistics.

Every party gets the same number of rows, and row ``i`` of every party is the same customer: training can zip the
parties' tables by position. ``rows`` index the party's own table (its ID source's row order, duplicates included).

Example:
    >>> import numpy as np
    >>> stats = PsiStats(rows=3, size=3, peer_sizes={"partner": 4}, intersection=2, duplicates=0,
    ...                  points_sent=7, points_received=7)
    >>> a = Alignment(rows=np.array([2, 0]), ids=["c", "a"], stats=stats)
    >>> (a.size, a.take(["a", "b", "c"]))
    (2, ['c', 'a'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class PsiStats:
    """Counts from one party's PSI run.

    Attributes:
        rows: rows read from this party's ID source.
        size: distinct IDs this party took part with (``rows`` minus dropped duplicates); the peers learn it.
        peer_sizes: each peer's set size, as the peer announced it.
        intersection: rows in the final alignment.
        duplicates: rows dropped under ``dedupe="first"``.
        points_sent: 32-byte curve points this party sent.
        points_received: 32-byte curve points this party received.
        seconds: wall-clock seconds of the run, filled by the runner (``None`` when the machine ran bare).
        bytes_sent: bytes of all frames this party sent, filled by the runner from the pump's statistics.
        resumed: per peer, the buckets restored from an interrupted run's kept progress (0: none).
    """

    rows: int
    size: int
    peer_sizes: dict[str, int] = field(hash=False)
    intersection: int
    duplicates: int
    points_sent: int
    points_received: int
    seconds: float | None = None
    bytes_sent: int | None = None
    resumed: dict[str, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, eq=False)
class Alignment:
    """One party's view of the aligned records.

    Attributes:
        rows: int64 row indices into this party's own table, in the order all parties agreed on.
        ids: the normalised IDs at ``rows`` when the ID source is held in memory, else ``None`` (a file source;
            read the rows back from the file if you need them).
        stats: counts and timings of the run.
    """

    rows: np.ndarray
    ids: list[str] | None
    stats: PsiStats

    @property
    def size(self) -> int:
        """Number of aligned records."""
        return len(self.rows)

    def take(self, values: Sequence[T]) -> list[T]:
        """Pick ``values`` (one per row of this party's table) in the agreed order."""
        return [values[r] for r in self.rows.tolist()]
