"""What a PSI run gives each party: its rows of the shared records in the agreed order, and run statistics.

Every party gets the same number of rows, and row ``i`` of every party is the same customer: training can zip the
parties' tables by position. ``rows`` index the party's own table (its ID source's row order, duplicates included).
:func:`canonical_rows` puts them in sorted-ID order, the order training uses.

:func:`plain_join` is the in-process stand-in for PSI: it compares raw IDs, so it is only for data that already sits
in one process (tests, notebooks with both views). Between organizations the private set intersection fills the same
role without revealing anyone outside the overlap.

Example:
    >>> import numpy as np
    >>> stats = PsiStats(rows=3, size=3, peer_sizes={"partner": 4}, intersection=2, duplicates=0,
    ...                  points_sent=7, points_received=7)
    >>> a = Alignment(rows=np.array([2, 0]), ids=["c", "a"], stats=stats)
    >>> (a.size, a.take(["a", "b", "c"]), canonical_rows(a).tolist())
    (2, ['c', 'a'], [0, 2])
    >>> rows = plain_join({"bank": np.array(["a", "b", "c"], object), "partner": np.array(["c", "a"], object)})
    >>> {p: r.tolist() for p, r in rows.items()}
    {'bank': [0, 2], 'partner': [1, 0]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from vsplit.errors import AlignmentError

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


def canonical_rows(alignment: Alignment) -> np.ndarray:
    """A PSI alignment's rows in sorted-ID order, so every run over the same data uses the same order.

    The order PSI agrees on depends on the session's random keys; sorting by the (normalised) ID, which both
    parties learn in ``reveal="both"`` mode, makes training reproducible across runs and runtimes. Without IDs
    (the partner in ``reveal="label_party"`` mode) the label party's order is kept as told.
    """
    if alignment.ids is None:
        return np.asarray(alignment.rows, dtype=np.int64)
    order = np.argsort(np.asarray(alignment.ids, dtype=object), kind="stable")
    return np.asarray(alignment.rows, dtype=np.int64)[order]


def plain_join(ids: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Row indices of every party's shared customers, in sorted-ID order (IDs must be unique per party)."""
    shared: set[str] | None = None
    for party_ids in ids.values():
        shared = set(party_ids) if shared is None else shared & set(party_ids)
    order = sorted(shared or ())
    if not order:
        raise AlignmentError(f"the parties {sorted(ids)} share no customers; check that they use the same ID scheme")
    rows = {}
    for party, party_ids in ids.items():
        position = {v: i for i, v in enumerate(party_ids)}
        rows[party] = np.fromiter((position[v] for v in order), dtype=np.int64, count=len(order))
    return rows
