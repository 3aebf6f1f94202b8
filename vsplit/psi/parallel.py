"""Compute backends for the curve arithmetic: in this process, or spread over worker processes.

A PSI machine is sans-IO but not compute-free: it hands each chunk of points to a backend object and gets the
blinded chunk back. :class:`SerialBackend` computes in the calling process (tests, notebooks); on a machine with
several cores, :class:`ProcessBackend` splits each chunk across a pool of worker processes, because X25519 holds the
GIL and so threads would not help. Workers receive raw bytes and return raw bytes; the scalar travels to them over
a local pipe and is never written anywhere.

Example:
    >>> import numpy as np
    >>> pts = np.full((3, 32), 9, np.uint8)
    >>> with ProcessBackend(workers=2, min_split=1) as pool:
    ...     bool((pool.blind(pts, scalar=bytes(32)) == SerialBackend().blind(pts, scalar=bytes(32))).all())
    True
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol

import numpy as np

from vsplit.errors import ConfigError
from vsplit.psi import curve


class Backend(Protocol):
    """Blinds chunks of u-coordinates."""

    def blind(self, points: np.ndarray, *, scalar: bytes) -> np.ndarray:
        """Return ``points`` ((n, 32) uint8) each multiplied by ``scalar``; raise :class:`curve.LowOrderPoint`."""


class SerialBackend:
    """Computes in the calling process."""

    def blind(self, points: np.ndarray, *, scalar: bytes) -> np.ndarray:
        return curve.blind(points, scalar=scalar)

    def close(self) -> None:
        """Nothing to stop."""


class ProcessBackend:
    """Spreads each chunk over ``workers`` processes (default: every core).

    Args:
        workers: number of worker processes.
        min_split: chunks smaller than this are computed in the calling process.
        start_method: the multiprocessing start method; ``"spawn"`` is safe alongside threads (channel readers),
            but re-imports the main module in each worker: guard a script's entry point with
            ``if __name__ == "__main__":``.

    Build it once and reuse it across runs: starting the workers takes about a second.
    """

    def __init__(self, *, workers: int | None = None, min_split: int = 2048, start_method: str = "spawn") -> None:
        self.workers = workers or os.cpu_count() or 1
        if self.workers < 1:
            raise ConfigError(f"psi workers: {self.workers} must be at least 1")
        self.min_split = min_split
        context = multiprocessing.get_context(start_method)
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
        # Start every worker now, so the first chunk of a run does not pay for interpreter start-up.
        list(self._pool.map(_warm, range(self.workers)))

    def blind(self, points: np.ndarray, *, scalar: bytes) -> np.ndarray:
        n = len(points)
        if n < self.min_split or self.workers == 1:
            return curve.blind(points, scalar=scalar)
        data = np.ascontiguousarray(points, dtype=np.uint8).tobytes()
        step = -(-n // self.workers) * curve.POINT_BYTES
        futures = [self._pool.submit(curve.blind_bytes, data[i : i + step], scalar) for i in range(0, len(data), step)]
        out = b"".join(f.result() for f in futures)
        return np.frombuffer(out, dtype=np.uint8).reshape(-1, curve.POINT_BYTES).copy()

    def worker_pids(self) -> list[int]:
        """Process ids of the workers (for memory accounting)."""
        return [p.pid for p in getattr(self._pool, "_processes", {}).values() if p.pid is not None]

    def close(self) -> None:
        """Stop the workers."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


BACKENDS = ("process", "ray")


def open_backend(kind: str = "process", *, workers: int = 1, ray_address: str = "") -> Any:
    """The backend a party's ``[psi]`` settings name; close it after the run.

    ``"process"``: this process with ``workers <= 1``, else a :class:`ProcessBackend` of ``workers``. ``"ray"``: a
    :class:`~vsplit.psi.ray_backend.RayBackend` of ``workers`` actors (0: one per CPU) on the cluster at
    ``ray_address``, or on a local Ray it starts when the address is empty.

    >>> type(open_backend("process")).__name__
    'SerialBackend'
    """
    if kind == "ray":
        from vsplit.psi.ray_backend import RayBackend

        return RayBackend(workers=workers or None, address=ray_address)
    if kind != "process":
        raise ConfigError(f"psi.backend: {kind!r} is not one of {', '.join(BACKENDS)}")
    return ProcessBackend(workers=workers) if workers > 1 else SerialBackend()


def _warm(_: int) -> int:
    return os.getpid()
