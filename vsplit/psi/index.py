"""Find 32-byte values fast, without a Python object per value.

Blinded and hashed values are uniformly random, so their first 8 bytes, read as an integer, almost never collide:
a sorted ``uint64`` array of these prefixes and :func:`numpy.searchsorted` find candidates, and a comparison of the
full 32 bytes confirms them. Ten million values cost 240 MB of NumPy arrays instead of gigabytes of ``bytes``
objects. The rare values whose prefix is shared (about one pair in 10^12 for 10^7 values) go to a small dict.

Example:
    >>> import numpy as np
    >>> values = np.arange(96, dtype=np.uint8).reshape(3, 32)
    >>> PointIndex(values).find(values[[2, 0]]).tolist()
    [2, 0]
    >>> PointIndex(values).find(np.zeros((1, 32), np.uint8)).tolist()
    [-1]
"""

from __future__ import annotations

import numpy as np


def prefixes(values: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each row of an ``(n, 32)`` uint8 array as little-endian uint64."""
    return np.ascontiguousarray(values[:, :8]).view("<u8").ravel()


class PointIndex:
    """An immutable lookup table from 32-byte values (rows of an ``(n, 32)`` uint8 array) to their positions.

    The values must be distinct (a repeated value maps to one of its positions).
    """

    def __init__(self, values: np.ndarray) -> None:
        self._values = values
        keys = prefixes(values)
        self._order = np.argsort(keys, kind="stable")
        self._sorted = keys[self._order]
        shared = self._sorted[1:] == self._sorted[:-1]
        self._slow: dict[bytes, int] = {}
        if shared.any():
            idx = np.flatnonzero(shared)
            clash = np.unique(self._sorted[np.concatenate([idx, idx + 1])])
            self._clash = clash
            for pos in self._order[np.isin(self._sorted, clash)]:
                self._slow.setdefault(values[pos].tobytes(), int(pos))
        else:
            self._clash = np.zeros(0, np.uint64)

    def __len__(self) -> int:
        return len(self._order)

    def find(self, queries: np.ndarray) -> np.ndarray:
        """Positions of each query row in the indexed values, ``-1`` where absent (int64, one per query)."""
        out = np.full(len(queries), -1, dtype=np.int64)
        if len(self._order) == 0 or len(queries) == 0:
            return out
        keys = prefixes(queries)
        at = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        hit = np.flatnonzero(self._sorted[at] == keys)
        if hit.size:
            pos = self._order[at[hit]]
            same = (self._values[pos] == queries[hit]).all(axis=1)
            out[hit[same]] = pos[same]
        if self._slow:
            for q in np.flatnonzero(np.isin(keys, self._clash)):
                out[q] = self._slow.get(queries[q].tobytes(), -1)
        return out


def repeated_rows(values: np.ndarray) -> np.ndarray:
    """Rows whose value equals that of an earlier row (ascending int64): the duplicates to drop or report.

    >>> v = np.zeros((4, 32), np.uint8); v[1, 0] = 1
    >>> repeated_rows(v).tolist()
    [2, 3]
    """
    if len(values) < 2:
        return np.zeros(0, dtype=np.int64)
    keys = prefixes(values)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    shared = np.flatnonzero(ordered[1:] == ordered[:-1])
    if shared.size == 0:
        return np.zeros(0, dtype=np.int64)
    candidates = np.unique(order[np.concatenate([shared, shared + 1])])
    seen: set[bytes] = set()
    repeats = []
    for row in candidates.tolist():  # ascending, so the first occurrence is kept
        value = values[row].tobytes()
        if value in seen:
            repeats.append(row)
        else:
            seen.add(value)
    return np.asarray(repeats, dtype=np.int64)
