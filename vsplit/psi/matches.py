"""The matches one side of a pair finds, bucket by bucket: in memory, or appended to files under a memory budget.

Theory of operation. A side that learns the overlap finds matches bucket after bucket (a bucket's matches are all
found before the first match of the next one: the own values of bucket ``k`` are complete before those of ``k + 1``
and the peer's chunks arrive in bucket order), so the matches form an append-only log whose per-bucket ends are
recorded; a Redo from bucket ``k`` truncates the log to the end of bucket ``k - 1``. Each match is its
double-blinded value (32 bytes), this side's position in its sent order and the position in the peer's sent order.
With ``spill=True`` each column goes to its own file in a private temporary folder (removed by :meth:`close` or
when the store is collected), so the main process holds none of it while the exchange runs.

:meth:`finish` returns what the party machines need: the sort keys of the agreed order (the first 8 bytes of each
value read big-endian, so sorting by key and then, for the rare equal keys, by the full value gives exactly the
ascending byte order of the values, :func:`agreed_order`), this side's positions in memory (16 bytes per match),
and the values and the peer's positions memory-mapped read-only from the files when spilled (touched only for ties
and for the label party's selections).

Example:
    >>> store = MatchStore(spill=True)
    >>> values = np.zeros((3, 32), np.uint8); values[:, 0] = [3, 1, 2]
    >>> store.add(0, values[:2], np.array([5, 6]), np.array([0, 1]))
    >>> store.add(1, values[2:], np.array([9]), np.array([4]))
    >>> store.truncate(1)  # a Redo from bucket 1
    >>> found = store.finish()
    >>> found.own.tolist(), agreed_order(found.values, keys=found.keys).tolist()
    ([5, 6], [1, 0])
    >>> store.close()
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vsplit.psi import curve

_COLUMNS = {"values": (np.uint8, curve.POINT_BYTES), "own": (np.int64, 1), "peer": (np.int64, 1),
            "keys": (np.uint64, 1)}


def order_keys(values: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each value as a big-endian uint64: sorting by them sorts by the values' leading bytes."""
    return np.ascontiguousarray(values[:, :8]).view(">u8").ravel().astype(np.uint64)


def agreed_order(values: np.ndarray, *, keys: np.ndarray | None = None) -> np.ndarray:
    """The agreed order of matches: ascending by double-blinded value, which both sides of a pair can compute.

    ``keys`` (:func:`order_keys` of ``values``) may be given so that ``values`` (a memory map) is read only where
    two keys are equal.

    >>> agreed_order(np.array([[2] * 32, [1] * 32], np.uint8)).tolist()
    [1, 0]
    """
    if len(values) == 0:
        return np.zeros(0, np.int64)
    keys = order_keys(values) if keys is None else keys
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    if tied.size:  # sort each run of equal keys by the full value
        starts = np.unique(np.concatenate([tied, tied + 1]))
        for run in np.split(starts, np.flatnonzero(np.diff(starts) != 1) + 1):
            members = order[run]
            full = np.ascontiguousarray(values[members]).view(f"V{curve.POINT_BYTES}").ravel()
            order[run] = members[np.argsort(full, kind="stable")]
    return order.astype(np.int64, copy=False)


@dataclass(frozen=True)
class Found:
    """All matches of a pair, in the order found: keys and own positions in memory, values and peer positions as
    arrays or read-only memory maps."""

    keys: np.ndarray
    own: np.ndarray
    values: np.ndarray
    peer: np.ndarray


class MatchStore:
    """An append-only log of matches by bucket.

    Args:
        spill: append the matches to files (in a fresh temporary folder) rather than keep them in memory.
        folder: where to create that folder (default: the system's temporary folder).
    """

    def __init__(self, *, spill: bool, folder: str | None = None) -> None:
        self.spilled = spill
        self._parts: dict[str, list[np.ndarray]] = {name: [] for name in _COLUMNS}
        self._ends: list[tuple[int, int]] = []  # (bucket, matches so far) after each add
        self.count = 0
        self._dir: Path | None = None
        if spill:
            self._dir = Path(tempfile.mkdtemp(prefix="vsplit-psi-matches-", dir=folder))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)

    def add(self, bucket: int, values: np.ndarray, own: np.ndarray, peer: np.ndarray) -> None:
        """Append the matches found in ``bucket`` (not lower than any bucket added before)."""
        if self._ends and bucket < self._ends[-1][0]:
            raise ValueError(f"matches of bucket {bucket} after those of bucket {self._ends[-1][0]}")
        columns = {"values": np.ascontiguousarray(values, np.uint8), "own": np.asarray(own, np.int64),
                   "peer": np.asarray(peer, np.int64), "keys": order_keys(values)}
        for name, column in columns.items():
            if self._dir is None:
                self._parts[name].append(column)
            else:
                with open(self._dir / name, "ab") as out:
                    out.write(column.tobytes())
        self.count += len(own)
        self._ends.append((bucket, self.count))

    def truncate(self, first: int) -> None:
        """Forget the matches of buckets ``first`` and later."""
        while self._ends and self._ends[-1][0] >= first:
            self._ends.pop()
        keep = self._ends[-1][1] if self._ends else 0
        if keep == self.count:
            return
        self.count = keep
        if self._dir is None:
            for name in _COLUMNS:
                self._parts[name] = self._parts[name][: len(self._ends)]
            return
        for name, (dtype, width) in _COLUMNS.items():
            path = self._dir / name
            if path.exists():
                with open(path, "r+b") as out:
                    out.truncate(keep * width * np.dtype(dtype).itemsize)

    def part(self, bucket: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The matches of ``bucket`` alone, in memory: values, own and peer positions (what a resumable PSI keeps)."""
        start = stop = 0
        for b, end in self._ends:
            if b < bucket:
                start = stop = end
            elif b == bucket:
                stop = end
        out = []
        for name in ("values", "own", "peer"):
            dtype, width = _COLUMNS[name]
            if self._dir is None:
                parts = [p for (b, _), p in zip(self._ends, self._parts[name], strict=True) if b == bucket]
                column = np.concatenate(parts) if parts else np.zeros((0, width) if width > 1 else 0, dtype)
            elif stop == start:
                column = np.zeros((0, width) if width > 1 else 0, dtype)
            else:
                size = np.dtype(dtype).itemsize * width
                column = np.fromfile(self._dir / name, dtype=dtype, count=(stop - start) * width, offset=start * size)
                column = column.reshape(-1, width) if width > 1 else column
            out.append(column)
        return out[0], out[1], out[2]

    def _column(self, name: str, *, in_memory: bool) -> np.ndarray:
        dtype, width = _COLUMNS[name]
        shape = (self.count, width) if width > 1 else (self.count,)
        if self._dir is None:
            parts = self._parts[name]
            return np.concatenate(parts) if parts else np.zeros(shape, dtype)
        if self.count == 0:
            return np.zeros(shape, dtype)
        if in_memory:
            return np.fromfile(self._dir / name, dtype=dtype).reshape(shape)
        return np.memmap(self._dir / name, dtype=dtype, mode="r", shape=shape)

    def finish(self) -> Found:
        """All matches; the in-memory log is handed over (this store then holds nothing but its files)."""
        found = Found(keys=self._column("keys", in_memory=True),
                      own=self._column("own", in_memory=True),
                      values=self._column("values", in_memory=False), peer=self._column("peer", in_memory=False))
        self._parts = {name: [] for name in _COLUMNS}
        return found

    def close(self) -> None:
        """Delete the files (memory maps already handed out stay readable until dropped)."""
        self._parts = {name: [] for name in _COLUMNS}
        if self._dir is not None:
            self._cleanup()
