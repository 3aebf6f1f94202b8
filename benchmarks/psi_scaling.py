"""Elliptic-curve throughput of one party's PSI backend as workers are added: points blinded per second.

    python benchmarks/psi_scaling.py [--points N] [--workers 1 2 ...] [--chunk C] [--repeats R]
                                     [--backend process|ray] [--buckets B]

Blinds ``N`` random u-coordinates in chunks of ``C`` (the PSI message size) with :class:`ProcessBackend` for each
worker count, after the pool has started, ``R`` times, and keeps the fastest run. With ``--backend ray`` the chunks
belong to ``B`` buckets in turn and go, all submitted at once, to the Ray actors that own those buckets' scalars
(:mod:`vsplit.psi.ray_backend`); Ray's daemons' CPU time is not counted. This is the part of PSI that
scales with cores; the two-party wall time of ``benchmarks/psi.py`` also holds hashing, matching and the peer.
Prints ONE JSON object::

    {"points": N, "points_per_second": {"1": ..., "2": ...}, "speedup": {"2": ...}, "core_us_per_point": {...}, ...}

``core_us_per_point`` is the CPU time of the main process and workers per point, in microseconds; on an idle
machine ``speedup`` approaches the worker count while ``core_us_per_point`` stays flat.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def _cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _backend(kind: str, workers: int):
    from vsplit.psi import ProcessBackend

    if kind == "ray":
        from vsplit.psi.ray_backend import RayBackend

        return RayBackend(workers=workers)
    return ProcessBackend(workers=workers, min_split=1)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--chunk", type=int, default=1 << 16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--backend", choices=["process", "ray"], default="process")
    parser.add_argument("--buckets", type=int, default=16, help="ray: buckets the chunks belong to")
    args = parser.parse_args(argv)

    import numpy as np

    from vsplit.psi import curve

    rng = np.random.default_rng(0)
    points = rng.integers(0, 256, (args.points, curve.POINT_BYTES), dtype=np.uint8)
    points[:, 31] &= 0x7F
    scalar = curve.new_scalar()
    rate, core = {}, {}
    load_before = [round(x, 2) for x in os.getloadavg()]
    for workers in args.workers:
        with _backend(args.backend, workers) as backend:
            pids = [os.getpid(), *backend.worker_pids()]
            best, best_cpu = float("inf"), 0.0
            for _ in range(args.repeats):
                cpu, began = _cpu_seconds(pids), time.perf_counter()
                if args.backend == "ray":
                    keys = backend.bucket_keys(args.buckets)
                    starts = range(0, args.points, args.chunk)
                    work = [keys.submit(i % args.buckets, points[s : s + args.chunk]) for i, s in enumerate(starts)]
                    for pending in work:
                        pending.result()
                    keys.close()
                else:
                    for start in range(0, args.points, args.chunk):
                        backend.blind(points[start : start + args.chunk], scalar=scalar)
                seconds = time.perf_counter() - began
                if seconds < best:
                    best, best_cpu = seconds, _cpu_seconds(pids) - cpu
        rate[str(workers)] = round(args.points / best)
        core[str(workers)] = round(best_cpu * 1e6 / args.points, 2)
    first = rate[str(args.workers[0])]
    report = {
        "points": args.points,
        "chunk": args.chunk,
        "points_per_second": rate,
        "speedup": {w: round(r / first, 2) for w, r in rate.items()},
        "core_us_per_point": core,
        "backend": args.backend,
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
