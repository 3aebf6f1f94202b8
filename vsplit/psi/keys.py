"""Who holds a pair's per-bucket secret scalars, and blinds chunks with them.

A PSI exchange blinds every point of bucket ``k`` - its own before sending, the peer's before answering - with
bucket ``k``'s scalar. :class:`BucketKeys` is the owner of those scalars: the exchange asks it to "blind this chunk
of bucket ``k``" and never sees a scalar. :class:`LocalKeys` keeps them in this process and computes with a
:class:`~vsplit.psi.parallel.Backend` (in this process or spread over a local worker pool); the Ray backend
(:mod:`vsplit.psi.ray_backend`) keeps each one inside the actor that created it, on whatever node that actor runs.

Work is submitted and collected later (:meth:`BucketKeys.submit` returns a :class:`Pending`), so an owner whose
scalars sit on other processes can blind the next buckets while the exchange handles this one; ``ahead`` says how
many of its own chunks the exchange should submit before it needs them (0: compute when collected).

A remote owner can lose scalars (a node dies). It then reassigns the lost buckets fresh scalars and raises
:class:`ScalarLost` naming them; the exchange redoes those buckets with its peer (:mod:`vsplit.psi.exchange`).

Example:
    >>> import numpy as np
    >>> from vsplit.psi.parallel import SerialBackend
    >>> keys = keys_for(SerialBackend(), buckets=2)
    >>> pts = np.full((3, 32), 9, np.uint8)
    >>> keys.submit(0, pts).result().shape, bool((keys.submit(0, pts).result() != keys.submit(1, pts).result()).any())
    ((3, 32), True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

import numpy as np

from vsplit.psi import curve


class ScalarLost(RuntimeError):
    """The scalars of ``buckets`` were lost (their worker died) and have been replaced by fresh ones."""

    def __init__(self, buckets: Iterable[int], why: str = "") -> None:
        self.buckets = sorted(set(buckets))
        super().__init__(f"the secret scalars of buckets {self.buckets} were lost{': ' + why if why else ''}")


class Pending(Protocol):
    """A chunk being blinded."""

    def result(self) -> np.ndarray:
        """The blinded chunk; raises :class:`curve.LowOrderPoint` or :class:`ScalarLost`."""


class BucketKeys(Protocol):
    """One pair's per-bucket scalars, held by their owner."""

    #: True when scalars can be lost (the exchange then keeps each bucket's points until the bucket is done).
    may_lose: bool
    #: Own chunks the exchange should submit ahead of sending them.
    ahead: int

    def submit(self, bucket: int, points: np.ndarray) -> Pending:
        """Start blinding ``points`` ((n, 32) uint8) with bucket ``bucket``'s scalar."""

    def renew(self, buckets: Iterable[int]) -> list[int]:
        """Replace the scalars of ``buckets`` with fresh ones; return any *other* buckets whose scalars were found
        lost meanwhile (their owner died), which now have fresh ones too."""

    def close(self) -> None:
        """Forget every scalar."""


@runtime_checkable
class KeyedBackend(Protocol):
    """A backend that owns the scalars itself (:mod:`vsplit.psi.ray_backend`)."""

    def bucket_keys(self, buckets: int) -> BucketKeys:
        """Fresh scalars for ``buckets`` buckets of one pair's exchange."""


class _Deferred:
    """Computes when collected."""

    def __init__(self, compute: Callable[[], np.ndarray]) -> None:
        self._compute = compute

    def result(self) -> np.ndarray:
        return self._compute()


class LocalKeys:
    """Scalars in this process; chunks blinded by ``backend`` when collected (the process backends' behaviour)."""

    may_lose = False
    ahead = 0

    def __init__(self, backend, buckets: int) -> None:
        self._backend = backend
        self._scalars = [curve.new_scalar() for _ in range(buckets)]

    def submit(self, bucket: int, points: np.ndarray) -> Pending:
        scalar = self._scalars[bucket]
        return _Deferred(lambda: self._backend.blind(points, scalar=scalar))

    def renew(self, buckets: Iterable[int]) -> list[int]:
        for k in buckets:
            self._scalars[k] = curve.new_scalar()
        return []

    def close(self) -> None:
        self._scalars = []


def keys_for(backend, buckets: int) -> BucketKeys:
    """The scalar owner for one pair: the backend's own (Ray), else :class:`LocalKeys` over ``backend``."""
    if isinstance(backend, KeyedBackend):
        return backend.bucket_keys(buckets)
    return LocalKeys(backend, buckets)
