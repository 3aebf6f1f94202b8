"""The Ray backend: each bucket's secret scalar is created, kept and used inside a Ray actor, on any node.

Theory of operation. :class:`RayBackend` starts ``workers`` :class:`KeyActor` actors (one per CPU, spread over the
cluster's nodes). For each pair's exchange, :meth:`RayBackend.bucket_keys` opens a key ring: bucket ``k`` is owned
by actor ``k mod workers``, which draws that bucket's scalar from its own ``os.urandom`` and keeps it in its memory.
A scalar is never serialised, returned or written: the party's main process sends chunks of points (raw ``uint8``
arrays through Ray's object store) and gets blinded chunks back. Chunks are submitted ahead (``ahead`` of them), so
while the exchange answers the peer's chunks of bucket ``k`` on one actor, other actors already blind this side's
next buckets: the work spreads over the actors only across buckets, so use at least as many buckets as workers.

When a node dies, its actors' scalars are gone. The key ring then hands the dead actor's buckets to surviving actors,
which draw fresh scalars, and raises :class:`~vsplit.psi.keys.ScalarLost`; the exchange redoes the unfinished ones
with its peer (:mod:`vsplit.psi.exchange`), so the intersection is unchanged. With every actor gone the run stops.

``pip install 'vsplit[ray]'`` installs Ray. With no ``address`` the backend starts a local Ray on this machine's
cores and shuts it down on :meth:`RayBackend.close`; with one (``"auto"``, ``"ray://head:10001"``, ...) it joins
that cluster, whose nodes must have vsplit installed. If Ray is already initialised (a notebook, a test), it is used
as it is and left running.

Example (not run here: starting Ray takes seconds)::

    with RayBackend(workers=2) as backend:
        align_in_process(tables, label_party="bank", config=PsiConfig(buckets=8), backend=backend)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from vsplit.errors import ConfigError, VsplitError
from vsplit.psi import curve
from vsplit.psi.keys import ScalarLost

#: Own chunks a key ring lets the exchange submit ahead of sending them.
AHEAD = 16
INSTALL_HINT = "pip install 'vsplit[ray]'"


def import_ray() -> Any:
    """The ``ray`` module, or :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"psi.backend: 'ray' needs Ray, which is not installed; {INSTALL_HINT}") from None
    return ray


class KeyActor:
    """Runs inside a Ray actor: holds the scalars of the buckets it owns and blinds chunks with them."""

    def __init__(self) -> None:
        self._scalars: dict[tuple[str, int], bytes] = {}

    def ready(self) -> int:
        return os.getpid()

    def renew(self, ring: str, buckets: list[int]) -> None:
        for k in buckets:
            self._scalars[ring, k] = curve.new_scalar()

    def blind(self, ring: str, bucket: int, points: np.ndarray) -> np.ndarray | None:
        """``points`` blinded with the ring's bucket scalar; ``None`` for a small-order point (a crafted input)."""
        try:
            return curve.blind(points, scalar=self._scalars[ring, bucket])
        except curve.LowOrderPoint:
            return None

    def forget(self, ring: str) -> None:
        for key in [key for key in self._scalars if key[0] == ring]:
            del self._scalars[key]


class RayBackend:
    """Curve arithmetic in Ray actors that own the scalars.

    Args:
        workers: actors to start (default: the cluster's CPUs, or this machine's cores for a local Ray).
        address: a Ray cluster to join; empty starts a local Ray with ``workers`` CPUs.
        num_cpus: CPUs each actor reserves (lower it to run several parties' actors on one small cluster).
        ahead: own chunks an exchange submits before it needs them.
    """

    def __init__(self, *, workers: int | None = None, address: str = "", num_cpus: float = 1.0,
                 ahead: int = AHEAD) -> None:
        ray = self._ray = import_ray()
        self._started = False
        if workers is not None and workers < 1:
            raise ConfigError(f"psi.workers: {workers} must be at least 1")
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
                self._started = True
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.ahead = ahead
        remote = ray.remote(num_cpus=num_cpus, max_restarts=0)(KeyActor)
        self._actors: dict[int, Any] = {
            i: remote.options(scheduling_strategy="SPREAD").remote() for i in range(self.workers)
        }
        self._pids = dict(zip(self._actors, ray.get([a.ready.remote() for a in self._actors.values()]), strict=True))

    def bucket_keys(self, buckets: int) -> RayKeys:
        """A fresh key ring of ``buckets`` scalars for one pair's exchange."""
        return RayKeys(self, buckets)

    def alive(self) -> list[int]:
        """Ids of the actors not known to be dead."""
        if not self._actors:
            raise VsplitError("every Ray worker of this party's PSI backend died; restart the cluster and rerun")
        return sorted(self._actors)

    def actor(self, i: int) -> Any:
        return self._actors[i]

    def dead(self, i: int) -> None:
        """Actor ``i`` died: never use it again."""
        self._actors.pop(i, None)
        self._pids.pop(i, None)

    def worker_pids(self) -> list[int]:
        """Process ids of the live actors (meaningful on this machine only)."""
        return list(self._pids.values())

    def close(self) -> None:
        """Stop the actors, and the local Ray if this backend started it."""
        for actor in self._actors.values():
            self._ray.kill(actor)
        self._actors = {}
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _RayPending:
    def __init__(self, ring: RayKeys, bucket: int, actor: int, ref: Any) -> None:
        self._ring, self.bucket, self.actor, self._ref = ring, bucket, actor, ref

    def result(self) -> np.ndarray:
        return self._ring.collect(self)


class RayKeys:
    """One pair's scalars, bucket ``k`` inside actor ``k mod workers`` (see the module docstring)."""

    may_lose = True

    def __init__(self, backend: RayBackend, buckets: int) -> None:
        self._backend = backend
        self._ray = backend._ray
        self.ahead = backend.ahead
        self._ring = os.urandom(8).hex()
        alive = backend.alive()
        self._owner = {k: alive[k % len(alive)] for k in range(buckets)}
        self.renew(range(buckets))

    def submit(self, bucket: int, points: np.ndarray) -> _RayPending:
        actor = self._owner[bucket]
        ref = self._backend.actor(actor).blind.remote(self._ring, bucket, np.ascontiguousarray(points))
        return _RayPending(self, bucket, actor, ref)

    def collect(self, pending: _RayPending) -> np.ndarray:
        errors = self._ray.exceptions
        try:
            out = self._ray.get(pending._ref)
        except (errors.RayActorError, errors.ObjectLostError) as exc:
            raise ScalarLost([*self._replace(pending.actor), pending.bucket], why=type(exc).__name__) from None
        if out is None:
            raise curve.LowOrderPoint("a u-coordinate of small order was sent; the peer is not following the protocol")
        return out

    def _replace(self, dead: int) -> list[int]:
        """Hand the buckets of the dead actor to live ones, with fresh scalars; return every bucket that lost its."""
        self._backend.dead(dead)
        lost = [k for k, owner in self._owner.items() if owner == dead]
        alive = self._backend.alive()
        for i, k in enumerate(lost):
            self._owner[k] = alive[i % len(alive)]
        return [*lost, *self.renew(lost)]

    def renew(self, buckets: Iterable[int]) -> list[int]:
        """Fresh scalars for ``buckets``; returns the other buckets whose scalars died with an actor found dead."""
        wanted = set(buckets)
        by_actor: dict[int, list[int]] = {}
        for k in wanted:
            by_actor.setdefault(self._owner[k], []).append(k)
        refs = {a: self._backend.actor(a).renew.remote(self._ring, ks) for a, ks in by_actor.items()}
        extra: list[int] = []
        for actor, ref in refs.items():
            try:
                self._ray.get(ref)
            except self._ray.exceptions.RayActorError:
                extra += self._replace(actor)
        return sorted(set(extra) - wanted)

    def close(self) -> None:
        for actor in set(self._owner.values()):
            if actor in self._backend._actors:
                self._backend.actor(actor).forget.remote(self._ring)
