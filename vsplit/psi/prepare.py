"""Turn a party's ID column into the u-coordinates it will send: normalise, hash, bucket, drop duplicates, shuffle.

The column is read batch by batch; each ID is hashed under the session salt and its row and hash go to its bucket
(:mod:`vsplit.psi.store`, in memory or spilled to files), so no set of Python strings is ever built. Duplicates
are found on the hashes one bucket at a time (equal salted hashes mean equal normalised IDs, which share a bucket).
A bucket is laid out only when it is about to be sent: its rows in a uniformly random order from a generator seeded
with 256 bits from the OS CSPRNG, padded with dummies to the public bucket size, so the positions of shared IDs in
what a party sends say nothing about where they sit in its table. With one bucket (the default) there is no padding.

Example:
    >>> from vsplit.data.id_sources import as_source
    >>> from vsplit.psi.ids import IdPolicy
    >>> ready = prepare_ids(as_source(["b", "a", "b"]), policy=IdPolicy(dedupe="first"), salt=bytes(32), label=b"t")
    >>> (ready.rows_read, ready.duplicates, ready.distinct, ready.size)
    (3, 1, 2, 2)
    >>> order, points = ready.bucket(0)
    >>> sorted(order.tolist()), points.shape
    ([0, 1], (2, 32))
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import numpy as np

from vsplit.data.id_sources import IdSource
from vsplit.errors import AlignmentError
from vsplit.psi import curve
from vsplit.psi.buckets import GRANULE, bucket_of, pad_bucket, padded_size
from vsplit.psi.ids import IdPolicy, encode_batch
from vsplit.psi.index import repeated_rows
from vsplit.psi.store import BYTES_PER_ID, BucketStore

#: Rows read and hashed at a time.
BATCH_ROWS = 1 << 16
#: The hashed IDs may take up to 1/STORE_SHARE of ``memory_budget_mb`` before they are spilled: the rest is for the
#: sent order (8 bytes per point), the matches' keys and positions and the chunks in flight.
STORE_SHARE = 4


def _fresh_rng() -> np.random.Generator:
    """A generator seeded with 256 bits from the OS CSPRNG: the sending order is not predictable."""
    return np.random.default_rng(int.from_bytes(os.urandom(32), "little"))


@dataclass
class PreparedIds:
    """A party's hashed IDs, by bucket, ready to be laid out and sent.

    Attributes:
        store: rows and hashes per bucket (duplicates included).
        counts: distinct IDs per bucket.
        rows_read: rows in the source.
        duplicates: rows dropped as repeats of an earlier row.
        size: the public size every bucket is padded to (the distinct count with one bucket).
    """

    store: BucketStore
    counts: np.ndarray
    rows_read: int
    duplicates: int
    size: int
    repeats: dict[int, np.ndarray] = field(default_factory=dict)
    #: SHA-256 (hex) of the salted hashes in table order and the distinct counts (``digest=True``), else ``""``
    digest: str = ""
    _rng: np.random.Generator = field(default_factory=_fresh_rng)

    @property
    def distinct(self) -> int:
        """Distinct IDs in all buckets."""
        return int(self.counts.sum())

    def bucket(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Bucket ``k`` in sending order, then freed from the store: rows (``-1`` for dummies) and u-coordinates."""
        rows, hashed = self.store.load(k)
        repeats = self.repeats.pop(k, None)
        if repeats is not None:
            keep = np.ones(len(rows), bool)
            keep[repeats] = False
            rows, hashed = rows[keep], hashed[keep]
        self.store.drop(k)
        return pad_bucket(rows, hashed, size=self.size, rng=self._rng)


def prepare_ids(
    source: IdSource,
    *,
    policy: IdPolicy,
    salt: bytes,
    label: bytes,
    buckets: int = 1,
    memory_budget_mb: int = 0,
    digest: bool = False,
) -> PreparedIds:
    """Hash every ID of ``source`` under ``salt`` and ``label`` into ``buckets``, apply the duplicate policy.

    With ``memory_budget_mb`` > 0, buckets are spilled to files unless the source says they fit in a quarter of
    that budget (:data:`STORE_SHARE`). With ``digest`` the result carries a digest of this side's inputs under
    ``salt`` (what a resumed PSI checks, :mod:`vsplit.psi.resume`).

    Raises:
        DataError: an ID is missing, empty or of an unusable type (names the row).
        AlignmentError: duplicates under ``dedupe="error"`` (names how many and the fix).
    """
    hint = source.size_hint()
    fits = hint is not None and hint * BYTES_PER_ID * STORE_SHARE <= memory_budget_mb << 20
    store = BucketStore(buckets, spill=memory_budget_mb > 0 and not fits)
    rows = 0
    hasher = hashlib.sha256(b"vsplit-psi inputs") if digest else None
    for batch in source.batches(BATCH_ROWS):
        points = curve.hash_to_u(encode_batch(batch, policy=policy, first_row=rows), salt=salt, label=label)
        store.add(np.arange(rows, rows + len(points), dtype=np.int64), points, bucket_of(points, buckets=buckets))
        if hasher is not None:
            hasher.update(np.ascontiguousarray(points).data)
        rows += len(points)
    counts = np.zeros(buckets, np.int64)
    repeats: dict[int, np.ndarray] = {}
    first_repeat = rows
    for k in range(buckets):
        bucket_rows, hashed = store.load(k)
        found = repeated_rows(hashed)  # positions in the bucket; its rows ascend, so the first row of each is kept
        counts[k] = len(bucket_rows) - len(found)
        if found.size:
            repeats[k] = found
            first_repeat = min(first_repeat, int(bucket_rows[found[0]]))
    duplicates = int(sum(len(r) for r in repeats.values()))
    if duplicates and policy.dedupe == "error":
        store.close()
        raise AlignmentError(
            f"{source.name}: {duplicates} duplicate ID(s) after normalisation (first repeat at row {first_repeat}); "
            "remove them, or set psi.duplicates = \"first\" in the party config (IdPolicy(dedupe='first') in code) "
            "to keep the first row of each"
        )
    distinct = int(counts.sum())
    size = distinct if buckets == 1 else max(padded_size(distinct, buckets=buckets),
                                             GRANULE * -(-int(counts.max()) // GRANULE))
    if hasher is not None:
        hasher.update(counts.astype("<i8").tobytes())
    return PreparedIds(store=store, counts=counts, rows_read=rows, duplicates=duplicates, size=size, repeats=repeats,
                       digest=hasher.hexdigest() if hasher is not None else "")
