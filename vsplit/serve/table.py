"""Embeddings by keyed ID: what a partner serves, and what the bank holds of a partner in cached mode.

An :class:`EmbeddingTable` is immutable: an update (a new snapshot, a delta) builds a new table, which the holder
swaps in with one assignment, so a reader never sees half an update.

Example:
    >>> import numpy as np
    >>> keys = np.arange(32, dtype=np.uint8).reshape(2, 16)
    >>> t = EmbeddingTable.build(keys, np.ones((2, 3), np.float32))
    >>> known, values = t.lookup(np.stack([keys[1], np.zeros(16, np.uint8)]))
    >>> known.tolist(), values.shape
    ([True, False], (2, 3))
    >>> d = t.diff(EmbeddingTable.build(keys[:1], np.zeros((1, 3), np.float32)))
    >>> len(d[0]), len(d[2])
    (1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.serve.messages import KEY_BYTES


@dataclass(frozen=True)
class EmbeddingTable:
    """Keys ``(n, 16)`` uint8, their embeddings ``(n, width)`` float32 (or a boosting partner's decision bits,
    uint8, or a scorecard partner's points, float64), and the row of each key."""

    keys: np.ndarray
    values: np.ndarray
    index: dict[bytes, int]

    @classmethod
    def build(cls, keys: np.ndarray, values: np.ndarray) -> EmbeddingTable:
        """A table of ``keys`` and ``values``; a key given twice keeps its first row."""
        index: dict[bytes, int] = {}
        raw = np.ascontiguousarray(keys, dtype=np.uint8).tobytes()
        for i in range(len(keys)):
            index.setdefault(raw[i * KEY_BYTES:(i + 1) * KEY_BYTES], i)
        dtype = np.asarray(values).dtype
        if dtype not in (np.uint8, np.float64):  # decision bits stay bits, a scorecard's points float64
            dtype = np.float32
        return cls(keys=keys, values=np.ascontiguousarray(values, dtype=dtype), index=index)

    @classmethod
    def empty(cls, width: int) -> EmbeddingTable:
        return cls.build(np.zeros((0, KEY_BYTES), np.uint8), np.zeros((0, width), np.float32))

    @property
    def width(self) -> int:
        return int(self.values.shape[1])

    def __len__(self) -> int:
        return len(self.index)

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per key: known or not, and its embedding (zeros where not known)."""
        raw = np.ascontiguousarray(keys, dtype=np.uint8).tobytes()
        rows = np.asarray([self.index.get(raw[i * KEY_BYTES:(i + 1) * KEY_BYTES], -1) for i in range(len(keys))],
                          dtype=np.int64)
        known = rows >= 0
        values = np.zeros((len(keys), self.width), self.values.dtype)
        if known.any():
            values[known] = self.values[rows[known]]
        return known, values

    def diff(self, new: EmbeddingTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What changed from this table to ``new``: ``(keys, values)`` of rows new or changed, and removed keys."""
        changed = []
        for key, row in new.index.items():
            old = self.index.get(key)
            if old is None or not np.array_equal(self.values[old], new.values[row]):
                changed.append(row)
        gone = [self.index[k] for k in self.index.keys() - new.index.keys()]
        rows = np.asarray(changed, dtype=np.int64)
        return new.keys[rows], new.values[rows], self.keys[np.asarray(gone, dtype=np.int64)]

    def apply(self, keys: np.ndarray, values: np.ndarray, removed: np.ndarray) -> EmbeddingTable:
        """A new table: this one with ``keys`` set to ``values`` and ``removed`` keys dropped."""
        drop = {removed[i].tobytes() for i in range(len(removed))} | {keys[i].tobytes() for i in range(len(keys))}
        keep = [row for key, row in self.index.items() if key not in drop]
        rows = np.asarray(keep, dtype=np.int64)
        return EmbeddingTable.build(np.concatenate([self.keys[rows], keys]),
                                    np.concatenate([self.values[rows], values.astype(self.values.dtype)]))
