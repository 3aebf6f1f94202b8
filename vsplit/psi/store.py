"""A party's hashed IDs grouped by bucket: in memory, or spilled to files when they would exceed a memory budget.

Preparing a bucketed PSI reads the ID column once, batch by batch, hashes each ID under the session salt and appends
its row and hash (40 bytes) to its bucket. Equal IDs hash alike, so they share a bucket: duplicates are found one
bucket at a time, and a bucket is loaded only while it is being sent. With ``memory_budget_mb`` set and a table
whose 40 bytes per row exceed it, buckets are appended to files in a private temporary folder (removed by
:meth:`BucketStore.close` or when the store is collected) instead of held in memory, so the memory a party needs
grows with the size of one bucket, not of its table.

Example:
    >>> store = BucketStore(2, spill=True)
    >>> store.add(np.array([0, 1, 2]), np.arange(96, dtype=np.uint8).reshape(3, 32), np.array([1, 0, 1]))
    >>> rows, hashed = store.load(1)
    >>> rows.tolist(), hashed[:, 0].tolist(), store.spilled
    ([0, 2], [0, 64], True)
    >>> store.close()
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np

#: Bytes a bucket holds per ID: its row (int64) and its hash.
BYTES_PER_ID = 8 + 32


class BucketStore:
    """Rows and hashes per bucket, appended batch by batch and loaded one bucket at a time.

    Args:
        buckets: the bucket count.
        spill: keep the buckets in files (in a fresh temporary folder) rather than in memory.
        folder: where to create that folder (default: the system's temporary folder).
    """

    def __init__(self, buckets: int, *, spill: bool, folder: str | None = None) -> None:
        self.buckets = buckets
        self.spilled = spill
        self._parts: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(buckets)]
        self._dir: Path | None = None
        if spill:
            self._dir = Path(tempfile.mkdtemp(prefix="vsplit-psi-", dir=folder))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)

    def add(self, rows: np.ndarray, hashed: np.ndarray, bucket: np.ndarray) -> None:
        """Append ``rows`` with their ``hashed`` IDs to the buckets ``bucket`` (all three aligned)."""
        order = np.argsort(bucket, kind="stable")  # keeps the rows ascending inside each bucket
        edges = np.searchsorted(bucket[order], np.arange(self.buckets + 1))
        for k in range(self.buckets):
            part = order[edges[k] : edges[k + 1]]
            if part.size == 0:
                continue
            these_rows = np.ascontiguousarray(rows[part], dtype=np.int64)
            these_hashes = np.ascontiguousarray(hashed[part])
            if self._dir is None:
                self._parts[k].append((these_rows, these_hashes))
                continue
            with open(self._dir / f"{k}.rows", "ab") as out:
                out.write(these_rows.tobytes())
            with open(self._dir / f"{k}.hashes", "ab") as out:
                out.write(these_hashes.tobytes())

    def load(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Bucket ``k``'s rows (int64, ascending) and hashes ((n, 32) uint8)."""
        if self._dir is None:
            parts = self._parts[k]
            if not parts:
                return np.zeros(0, np.int64), np.zeros((0, 32), np.uint8)
            if len(parts) > 1:  # keep one copy, not the parts and their concatenation
                parts[:] = [(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))]
            return parts[0]
        rows_file, hashes_file = self._dir / f"{k}.rows", self._dir / f"{k}.hashes"
        if not rows_file.exists():
            return np.zeros(0, np.int64), np.zeros((0, 32), np.uint8)
        rows = np.fromfile(rows_file, dtype=np.int64)
        return rows, np.fromfile(hashes_file, dtype=np.uint8).reshape(len(rows), 32)

    def drop(self, k: int) -> None:
        """Free bucket ``k``."""
        self._parts[k] = []
        if self._dir is not None:
            for suffix in ("rows", "hashes"):
                (self._dir / f"{k}.{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        """Free the buckets (and delete the folder, if spilled)."""
        self._parts = [[] for _ in range(self.buckets)]
        if self._dir is not None:
            self._cleanup()
