"""What the bank does with a partner's cached-mode snapshot: check it, then merge its parts into the table it holds.

A snapshot (or a delta) is accepted only if its signature verifies against the partner's pinned certificate, its
embeddings have the width the model version expects and every value is finite; a refused one changes nothing. The
parts of one snapshot are merged when the last arrives: a full snapshot replaces the held table, a delta is applied
to it (:meth:`~vsplit.serve.table.EmbeddingTable.apply`).

:class:`SnapshotStore` holds the parts while they arrive, bounded: parts in order, at most :data:`MAX_PARTS` of one
snapshot and ``max_bytes`` of one partner's parts at once, an incomplete snapshot dropped after ``timeout_s``, when a
newer one starts, or when its link closes (:meth:`SnapshotStore.drop`). ``seq`` strictly increases per partner and
run (a snapshot replayed after a newer one is refused), and an update that would remove more than ``max_removed`` of
the customers held of a partner is refused (a truncated table file, or a partner emptying the bank's cache).

Example:
    >>> import numpy as np
    >>> from vsplit.serve.messages import Snapshot, id_keys
    >>> keys = id_keys(["1", "2"], run_id="v1")
    >>> part = Snapshot(run_id="v1", seq=1, full=True, part=0, parts=1, keys=keys, values=np.ones((2, 3), np.float32),
    ...                 removed=keys[:0], signature=np.zeros(0, np.uint8))
    >>> len(merge_snapshot(None, [part]))
    2
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vsplit.serve import messages as m
from vsplit.serve.table import EmbeddingTable

log = logging.getLogger(__name__)

#: the most parts one snapshot may have (65,536 rows each: a billion customers)
MAX_PARTS = 16384


def check_snapshot(msg: m.Snapshot, *, cert: str | Path, width: int) -> bool:
    """Whether ``msg`` is signed by the key of ``cert`` and holds finite embeddings (or decision bits) of ``width``
    columns."""
    from vsplit.serve.signing import verify

    digest = m.snapshot_digest(msg.run_id, msg.seq, msg.full, msg.part, msg.parts, msg.keys, msg.values, msg.removed)
    if not verify(cert, digest, msg.signature.tobytes()):
        return False
    return msg.values.shape[1] == width and bool(np.isfinite(msg.values).all())


def merge_snapshot(held: EmbeddingTable | None, parts: Sequence[m.Snapshot]) -> EmbeddingTable:
    """The table after every part of one snapshot: ``held`` replaced (a full snapshot, or nothing held) or updated."""
    keys = np.concatenate([p.keys for p in parts])
    values = np.concatenate([p.values for p in parts])
    removed = np.concatenate([p.removed for p in parts])
    if parts[-1].full or held is None:
        return EmbeddingTable.build(keys, values)
    return held.apply(keys, values, removed)


@dataclass
class _Assembly:
    """The parts of one snapshot received so far."""

    seq: int
    full: bool
    parts: int
    started: float
    received: list[m.Snapshot] = field(default_factory=list)
    nbytes: int = 0


def _nbytes(msg: m.Snapshot) -> int:
    return int(msg.keys.nbytes + msg.values.nbytes + msg.removed.nbytes)


class SnapshotStore:
    """Verified snapshot parts of each partner, assembled under bounds (see the module docstring).

    Example:
        >>> import numpy as np
        >>> from vsplit.serve.messages import Snapshot, id_keys
        >>> keys = id_keys(["1", "2"], run_id="v1")
        >>> def snap(seq, removed):
        ...     return Snapshot(run_id="v1", seq=seq, full=removed is None, part=0, parts=1, keys=keys[:0] if removed
        ...                     is not None else keys, values=np.ones((0 if removed is not None else 2, 3), np.float32),
        ...                     removed=keys[:0] if removed is None else removed, signature=np.zeros(0, np.uint8))
        >>> store = SnapshotStore(max_bytes=1 << 20, timeout_s=60, max_removed=0.2)
        >>> ok, table = store.add("shop", snap(5, None), held=None)
        >>> ok, len(table)
        (True, 2)
        >>> store.add("shop", snap(4, None), held=table)  # replayed: older than the last
        (False, None)
        >>> store.add("shop", snap(6, keys), held=table)  # a delta removing every customer
        (False, None)
    """

    def __init__(self, *, max_bytes: int, timeout_s: float, max_removed: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes, self.timeout_s, self.max_removed = max_bytes, timeout_s, max_removed
        self._clock = clock
        self._pending: dict[tuple[str, str], _Assembly] = {}
        self._last: dict[tuple[str, str], int] = {}

    def pending_bytes(self, partner: str | None = None) -> int:
        """Bytes of incomplete snapshots held (of ``partner``, or of all)."""
        return sum(a.nbytes for (p, _), a in self._pending.items() if partner is None or p == partner)

    def drop(self, partner: str) -> None:
        """Forget ``partner``'s incomplete snapshots (its link closed)."""
        for key in [k for k in self._pending if k[0] == partner]:
            log.info("dropped an incomplete snapshot %d of %s from %s (its link closed)", self._pending[key].seq,
                     key[1], partner)
            del self._pending[key]

    def expire(self) -> None:
        """Drop incomplete snapshots older than ``timeout_s``."""
        now = self._clock()
        for key, assembly in list(self._pending.items()):
            if now - assembly.started > self.timeout_s:
                log.warning("dropped snapshot %d of %s from %s: incomplete after %g s (%d of %d parts)",
                            assembly.seq, key[1], key[0], self.timeout_s, len(assembly.received), assembly.parts)
                del self._pending[key]

    def add(self, partner: str, msg: m.Snapshot, *, held: EmbeddingTable | None) -> tuple[bool, EmbeddingTable | None]:
        """Take one verified part of ``partner``: whether it is accepted, and the new table once the last is here."""
        self.expire()
        key = (partner, msg.run_id)
        last = self._last.get(key, -1)
        if msg.seq <= last:
            return self._refuse(partner, msg, f"seq {msg.seq} is not after the last accepted one ({last}): replayed")
        if msg.parts > MAX_PARTS:
            return self._refuse(partner, msg, f"{msg.parts} parts, more than {MAX_PARTS}")
        assembly = self._pending.get(key)
        if assembly is not None and msg.seq != assembly.seq:
            if msg.seq < assembly.seq or msg.part != 0:
                return self._refuse(partner, msg, f"interleaved with snapshot {assembly.seq} still arriving")
            del self._pending[key]  # superseded by a newer snapshot
            assembly = None
        if assembly is None:
            if msg.part != 0:
                return self._refuse(partner, msg, f"part {msg.part} without part 0")
            assembly = _Assembly(seq=msg.seq, full=msg.full, parts=msg.parts, started=self._clock())
        elif (msg.part, msg.parts, msg.full) != (len(assembly.received), assembly.parts, assembly.full):
            del self._pending[key]
            return self._refuse(partner, msg, f"part {msg.part} of {msg.parts} out of order")
        if self.pending_bytes(partner) - self._held(key) + assembly.nbytes + _nbytes(msg) > self.max_bytes:
            self._pending.pop(key, None)
            return self._refuse(partner, msg, f"its parts exceed serve.max_snapshot_mb "
                                              f"({self.max_bytes >> 20} MiB held per partner)")
        assembly.received.append(msg)
        assembly.nbytes += _nbytes(msg)
        if len(assembly.received) < assembly.parts:
            self._pending[key] = assembly
            return True, None
        self._pending.pop(key, None)
        table = merge_snapshot(held, assembly.received)
        if held is not None and len(held):
            gone = len(held.index.keys() - table.index.keys())
            if gone > self.max_removed * len(held):
                return self._refuse(partner, msg, f"it removes {gone} of the {len(held)} customers held, more than "
                                                  f"serve.max_delta_removed = {self.max_removed:g}; the held table is "
                                                  "kept (if the partner's table really shrank, raise the setting)")
        self._last[key] = msg.seq
        return True, table

    def _held(self, key: tuple[str, str]) -> int:
        assembly = self._pending.get(key)
        return 0 if assembly is None else assembly.nbytes

    def _refuse(self, partner: str, msg: m.Snapshot, why: str) -> tuple[bool, None]:
        log.warning("refused %s snapshot %d of %s from %s: %s", "full" if msg.full else "delta", msg.seq, msg.run_id,
                    partner, why)
        return False, None
