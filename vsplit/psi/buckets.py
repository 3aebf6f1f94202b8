"""Bucketed PSI: each party splits its points into B buckets that both can compute, padded to a public size.

Theory of operation. A party's hashed IDs are u-coordinates ``u = H(salt, x)`` (:mod:`vsplit.psi.curve`), keyed by
the session salt both parties derive in the handshake, and never sent. The bucket of an ID is
``int.from_bytes(u[:8], "little") % B``: equal IDs land in the same bucket on both sides, and nobody without the
salt (an outsider, another session) can tell which bucket an ID falls in. Bucket ``k`` of one party is matched only
with bucket ``k`` of the other, with a fresh secret scalar per bucket, so buckets are independent PSI runs whose
union is the intersection: they can run on different workers or machines, and a finished bucket never has to be
redone.

Bucket sizes would say something about a party's IDs (a histogram of hash prefixes), so every bucket is padded to
the same public size ``S`` with dummy points, random u-coordinates that match nothing (a collision with a real
double-blinded value has probability about 2^-250). ``S`` is a public function of the party's set size and ``B``,
:func:`padded_size`: the mean bucket size plus six standard deviations, rounded up to a multiple of 64. The peer
then learns ``B * S`` instead of the set size ``n`` (so ``n`` to within about ``64 * B`` IDs) and nothing per
bucket. Padding costs ``B * S / n - 1`` more curve operations and bytes: 2.5 % for 1M IDs in 16 buckets, 0.5 % for
100M in 64, and a lot for small sets (0 when ``B = 1``, which is the unbucketed protocol). If a bucket ever
exceeds ``S`` (probability below 10^-8 per bucket), ``S`` grows to that bucket's size rounded up to 64, and that
run reveals it.

Dummies sit at random places inside their bucket, so the position of a shared ID says nothing about how many real
IDs its bucket holds.

Example:
    >>> hashed = np.random.default_rng(0).integers(0, 256, (40, 32), dtype=np.uint8)
    >>> np.bincount(bucket_of(hashed, buckets=4)).tolist()
    [10, 12, 8, 10]
    >>> padded_size(1_000_000, buckets=16)
    64064
    >>> order, points = pad_bucket(np.arange(10), hashed[:10], size=64, rng=np.random.default_rng(0))
    >>> len(order), sorted(order[order >= 0].tolist()) == list(range(10)), points.shape
    (64, True, (64, 32))
"""

from __future__ import annotations

import math
import os

import numpy as np

from vsplit.errors import ConfigError

#: Largest bucket count a party accepts (each bucket costs a scalar and at least one message).
MAX_BUCKETS = 1 << 12
#: Bucket sizes are multiples of this.
GRANULE = 64
_U_MASK = np.array([0xFF] * 31 + [0x7F], np.uint8)


def check_buckets(buckets: int) -> int:
    """``buckets`` if it is a valid bucket count, else :class:`ConfigError` naming the range."""
    if not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS:
        raise ConfigError(f"psi.buckets: {buckets!r} is not in 1..{MAX_BUCKETS}; 1 (no buckets) or 16 are good values")
    return buckets


def bucket_of(hashed: np.ndarray, *, buckets: int) -> np.ndarray:
    """The bucket of each hashed ID ((n, 32) uint8 u-coordinates) as int64 in ``0..buckets-1``."""
    if buckets == 1:
        return np.zeros(len(hashed), np.int64)
    prefix = np.ascontiguousarray(hashed[:, :8]).view("<u8").ravel()
    return (prefix % np.uint64(buckets)).astype(np.int64)


def padded_size(n: int, *, buckets: int) -> int:
    """The public size of each of a party's buckets, for ``n`` distinct IDs (``n`` itself when ``buckets == 1``)."""
    if buckets == 1:
        return n
    mean = n / buckets
    return GRANULE * math.ceil((mean + 6 * math.sqrt(mean) + 6) / GRANULE)


def pad_bucket(rows: np.ndarray, hashed: np.ndarray, *, size: int, rng: np.random.Generator) -> tuple[
    np.ndarray, np.ndarray
]:
    """One bucket in sending order: ``rows`` shuffled and padded with dummies to ``size`` positions.

    Returns the row sent at each position (``-1`` for a dummy) and the u-coordinates sent there.
    """
    order = np.full(size, -1, np.int64)
    points = np.empty((size, 32), np.uint8)
    places = rng.permutation(size)[: len(rows)]
    order[places] = rows
    points[places] = hashed
    dummy = order < 0
    if (count := int(dummy.sum())) > 0:  # random u-coordinates, bit 255 clear
        points[dummy] = np.frombuffer(os.urandom(32 * count), np.uint8).reshape(count, 32) & _U_MASK
    return order, points


def chunks_per_bucket(size: int, chunk: int) -> int:
    """Messages per bucket of ``size`` points when at most ``chunk`` points go in one."""
    return max(1, -(-size // chunk))


def chunk_of(index: int, *, size: int, chunk: int) -> tuple[int, slice]:
    """Bucket and positions (in the whole sent order) of message ``index``; a message never spans two buckets."""
    bucket, part = divmod(index, chunks_per_bucket(size, chunk))
    start = bucket * size + part * chunk
    return bucket, slice(start, min(start + chunk, (bucket + 1) * size))
