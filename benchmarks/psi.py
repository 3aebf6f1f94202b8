"""ECDH-PSI between two OS processes: wall time, peak memory and bytes per party.

    python benchmarks/psi.py --size N [--partner-size M] [--overlap F] [--reveal both|label_party]
                             [--workers W] [--buckets B] [--memory-budget-mb M] [--transport socket|tls]
                             [--backend process|ray] [--vs-openmined]

The parent writes each party's IDs to a Parquet file (so the parties stream them and their memory is their own),
starts the label party and the partner as separate processes joined by a channel - a local Unix socket by default,
or the mutual-TLS channel of :mod:`vsplit.transport` with ``--transport tls`` - each with a pool of ``W`` worker
processes for the curve arithmetic, and waits until both have connected and warmed up before the clock starts.
``--overlap F`` shares ``round(F * min(N, M))`` IDs. The parent then checks that both parties' rows point at the
same IDs in the same order, and prints ONE JSON object::

    {"sizes": {"label": N, "partner": M}, "intersection": k, "seconds": wall, "peak_rss_mb": {...},
     "bytes_sent": {...}, "party_seconds": {...}, "verified": true, ...}

``peak_rss_mb`` is, per party, the peak resident memory (VmHWM) of its main process plus that of its workers;
``peak_rss_mb_workers`` lists each worker's. ``--buckets B`` runs bucketed PSI (:mod:`vsplit.psi.buckets`);
``points_sent`` then includes the dummies that pad each bucket; ``--memory-budget-mb M`` spills each party's
hashed IDs to files by bucket when they exceed ``M`` MiB (``psi.memory_budget_mb``). ``core_us_per_id`` is, per
party, its CPU time (main process plus workers) in microseconds per ID it handled (its own plus the peer's, each
blinded once by it): the per-core cost of the protocol, which does not depend on how many cores ran it.
``--backend ray`` runs each party's curve arithmetic in ``W`` Ray actors that keep the bucket scalars
(:mod:`vsplit.psi.ray_backend`), each party on its own local Ray; its workers are then the actors, and
``cpu_seconds`` leaves out Ray's own daemons (raylet, GCS), whose CPU time ``ray_daemon_cpu_seconds`` reports.
``seconds_including_startup`` is the wall time from starting the two party processes to both results (interpreter
start-up, imports, worker pools, connecting); ``seconds`` is the PSI run alone.
``cpu_seconds`` (main process plus workers, per party) does not depend on other load: on an idle machine the wall
time is about their sum divided by the cores; ``load_average_before`` shows whether something else was running.
``--vs-openmined`` also runs the ``openmined-psi`` package (P-256, one thread, client learns the intersection) on
the same sets in a fresh process and adds its seconds and peak memory under ``"openmined"``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

COLUMN = "customer_id"


def make_tables(out: Path, *, size: int, partner_size: int, overlap: float, seed: int = 7) -> int:
    """Write label.parquet and partner.parquet; return the number of shared IDs."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shared = round(overlap * min(size, partner_size))
    rng = np.random.default_rng(seed)

    def ids(numbers: np.ndarray) -> pa.Array:
        scrambled = numbers.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # a bijection mod 2^64
        return pc.binary_join_element_wise("C", pa.array(scrambled).cast(pa.string()), "")

    label = rng.permutation(np.arange(size, dtype=np.int64))
    partner = rng.permutation(np.arange(size - shared, size - shared + partner_size, dtype=np.int64))
    pq.write_table(pa.table({COLUMN: ids(label)}), out / "label.parquet")
    pq.write_table(pa.table({COLUMN: ids(partner)}), out / "partner.parquet")
    return shared


def _peak_rss_mb(pids: list[int]) -> float:
    total_kb = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kb += int(line.split()[1])
        except OSError:
            pass
    return round(total_kb / 1024, 1)


def _cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time of the live processes ``pids``."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            pass
    return total


def _ray_daemons(exclude: list[int]) -> list[int]:
    """This process's child processes that are not its workers: the local Ray's daemons."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in exclude:
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == me:
                found.append(int(entry.name))
    return found


def _channel(role: str, spec: dict, ready):
    """Open this party's channel to the other party."""
    if spec["transport"] == "socket":
        import local_channel

        if role == "label":
            server = local_channel.listen(spec["path"])
            ready.set()
            return local_channel.accept(server)
        ready.wait(60)
        return local_channel.dial(spec["path"])
    from vsplit.transport.connect import open_channels

    me, peer = ("label", "partner") if role == "label" else ("partner", "label")
    files = spec["identities"]
    ready.set()
    channels = open_channels(
        me,
        role="listen" if role == "label" else "dial",
        address=("127.0.0.1", spec["port"]),
        own_cert=files[me]["cert"],
        own_key=files[me]["key"],
        peers={peer: files[peer]["cert"]},
        deadline_s=60,
    )
    return channels[peer]


def party(role: str, table: str, spec: dict, settings: dict, ready, barrier, results) -> None:
    """One party's process: warm a worker pool, connect, align, report."""
    import numpy as np

    from vsplit.psi import LabelParty, ParquetIds, Partner, ProcessBackend, PsiConfig
    from vsplit.runtime.psi import run_party
    from vsplit.runtime.pump import Pump

    try:
        if settings["backend"] == "ray":
            from vsplit.psi.ray_backend import RayBackend

            backend = RayBackend(workers=settings["workers"])
        else:
            backend = ProcessBackend(workers=settings["workers"])
        peer = "partner" if role == "label" else "label"
        channel = _channel(role, spec, ready)
        pump = Pump(role, {peer: channel}, session=spec["session"], timeout=600)
        config = PsiConfig(reveal=settings["reveal"], context="benchmark", buckets=settings["buckets"],
                           memory_budget_mb=settings["memory_budget_mb"])
        source = ParquetIds(table, column=COLUMN)
        if role == "label":
            machine = LabelParty(source, partners=[peer], config=config, backend=backend)
        else:
            machine = Partner(source, label_party=peer, config=config, backend=backend)
        barrier.wait(120)
        pids = [os.getpid(), *backend.worker_pids()]
        daemons = _ray_daemons(pids) if settings["backend"] == "ray" else []
        cpu_before, main_before, daemons_before = _cpu_seconds(pids), _cpu_seconds(pids[:1]), _cpu_seconds(daemons)
        alignment = run_party(pump, machine)
        cpu, cpu_main = _cpu_seconds(pids) - cpu_before, _cpu_seconds(pids[:1]) - main_before
        daemon_cpu = _cpu_seconds(daemons) - daemons_before
        rss = _peak_rss_mb(pids)
        rss_main = _peak_rss_mb([os.getpid()])
        rss_workers = [_peak_rss_mb([pid]) for pid in pids[1:]]
        backend.close()
        channel.close()
        results.put(
            {
                "role": role,
                "rows": np.asarray(alignment.rows, dtype=np.int64).tobytes(),
                "seconds": alignment.stats.seconds,
                "bytes_sent": alignment.stats.bytes_sent,
                "peak_rss_mb": rss,
                "peak_rss_mb_main": rss_main,
                "peak_rss_mb_workers": rss_workers,
                "peer_size": sum(alignment.stats.peer_sizes.values()),
                "points_sent": alignment.stats.points_sent,
                "size": alignment.stats.size,
                "cpu_seconds": round(cpu, 2),
                "cpu_seconds_main": round(cpu_main, 2),
                "ray_daemon_cpu_seconds": round(daemon_cpu, 2),
            }
        )
    except BaseException as exc:
        results.put({"role": role, "error": f"{type(exc).__name__}: {exc}"})
        raise


def verify(tmp: Path, label_rows, partner_rows) -> bool:
    """Both parties' rows must name the same IDs in the same order."""
    import pyarrow.parquet as pq

    label = pq.read_table(tmp / "label.parquet").column(COLUMN)
    partner = pq.read_table(tmp / "partner.parquet").column(COLUMN)
    return label.take(label_rows).equals(partner.take(partner_rows))


def openmined(tmp: Path, results) -> None:
    """openmined-psi on the same sets, in this (fresh) process: the partner is the client and learns the overlap."""
    import pyarrow.parquet as pq

    try:
        import private_set_intersection.python as psi
    except ImportError as exc:
        results.put({"error": f"openmined-psi is not importable ({exc}); pip install openmined-psi"})
        return
    server_items = pq.read_table(tmp / "label.parquet").column(COLUMN).to_pylist()
    client_items = pq.read_table(tmp / "partner.parquet").column(COLUMN).to_pylist()
    began = time.perf_counter()
    server = psi.server.CreateWithNewKey(True)
    client = psi.client.CreateWithNewKey(True)
    setup = server.CreateSetupMessage(1e-9, len(client_items), server_items, psi.DataStructure.RAW)
    request = client.CreateRequest(client_items)
    response = server.ProcessRequest(request)
    found = client.GetIntersection(setup, response)
    seconds = time.perf_counter() - began
    results.put(
        {
            "seconds": round(seconds, 2),
            "intersection": len(found),
            "peak_rss_mb": _peak_rss_mb([os.getpid()]),
            "bytes": setup.ByteSize() + request.ByteSize() + response.ByteSize(),
            "note": "one process, one thread, P-256; only the client (partner) learns the intersection",
        }
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, required=True, help="label party's IDs")
    parser.add_argument("--partner-size", type=int, default=None, help="partner's IDs (default: --size)")
    parser.add_argument("--overlap", type=float, default=0.5, help="shared fraction of the smaller set")
    parser.add_argument("--reveal", choices=["both", "label_party"], default="both")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes per party")
    parser.add_argument("--buckets", type=int, default=1, help="PSI buckets per party (1: unbucketed)")
    parser.add_argument("--memory-budget-mb", type=int, default=0, help="spill hashed IDs above this (0: never)")
    parser.add_argument("--transport", choices=["socket", "tls"], default="socket")
    parser.add_argument("--backend", choices=["process", "ray"], default="process", help="where the curve work runs")
    parser.add_argument("--vs-openmined", action="store_true")
    args = parser.parse_args(argv)
    partner_size = args.partner_size if args.partner_size is not None else args.size
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="vsplit-psi-bench-") as tmp_name:
        tmp = Path(tmp_name)
        shared = make_tables(tmp, size=args.size, partner_size=partner_size, overlap=args.overlap)
        spec: dict = {"transport": args.transport, "session": os.urandom(16), "path": str(tmp / "psi.sock")}
        if args.transport == "tls":
            from vsplit.transport.identity import create_identity, write_identity

            spec["port"] = _free_port()
            spec["identities"] = {}
            for name in ("label", "partner"):
                files = write_identity(create_identity(name), tmp / name)
                spec["identities"][name] = {"cert": str(files.cert_path), "key": str(files.key_path)}
        settings = {"workers": args.workers, "reveal": args.reveal, "buckets": args.buckets,
                    "memory_budget_mb": args.memory_budget_mb, "backend": args.backend}
        ready, barrier, results = ctx.Event(), ctx.Barrier(2), ctx.Queue()
        procs = [
            ctx.Process(
                target=party, args=(role, str(tmp / f"{role}.parquet"), spec, settings, ready, barrier, results)
            )
            for role in ("label", "partner")
        ]
        load_before = [round(x, 2) for x in os.getloadavg()]
        began = time.perf_counter()
        for p in procs:
            p.start()
        got = {}
        while len(got) < 2:
            item = results.get(timeout=3600)
            if "error" in item:
                for p in procs:
                    p.join(5)
                sys.exit(f"{item['role']} failed: {item['error']}")
            got[item["role"]] = item
        for p in procs:
            p.join(60)
        total = time.perf_counter() - began
        import numpy as np

        rows = {role: np.frombuffer(got[role]["rows"], dtype=np.int64) for role in got}
        report = {
            "sizes": {"label": args.size, "partner": partner_size},
            "intersection": len(rows["label"]),
            "seconds": round(max(got[r]["seconds"] for r in got), 2),
            "peak_rss_mb": {r: got[r]["peak_rss_mb"] for r in ("label", "partner")},
            "bytes_sent": {r: got[r]["bytes_sent"] for r in ("label", "partner")},
            "party_seconds": {r: round(got[r]["seconds"], 2) for r in ("label", "partner")},
            "peak_rss_mb_main_process": {r: got[r]["peak_rss_mb_main"] for r in ("label", "partner")},
            "cpu_seconds": {r: got[r]["cpu_seconds"] for r in ("label", "partner")},
            "cpu_seconds_main_process": {r: got[r]["cpu_seconds_main"] for r in ("label", "partner")},
            "core_us_per_id": {
                r: round(got[r]["cpu_seconds"] * 1e6 / (got[r]["size"] + got[r]["peer_size"]), 2)
                for r in ("label", "partner")
            },
            "peak_rss_mb_workers": {r: got[r]["peak_rss_mb_workers"] for r in ("label", "partner")},
            "points_sent": {r: got[r]["points_sent"] for r in ("label", "partner")},
            "buckets": args.buckets,
            "memory_budget_mb": args.memory_budget_mb,
            "backend": args.backend,
            "ray_daemon_cpu_seconds": {r: got[r]["ray_daemon_cpu_seconds"] for r in ("label", "partner")},
            "load_average_before": load_before,
            "expected_intersection": shared,
            "verified": bool(len(rows["label"]) == shared and verify(tmp, rows["label"], rows["partner"])),
            "reveal": args.reveal,
            "transport": args.transport,
            "workers_per_party": args.workers,
            "cpus": os.cpu_count(),
            "seconds_including_startup": round(total, 2),
        }
        if args.vs_openmined:
            queue = ctx.Queue()
            proc = ctx.Process(target=openmined, args=(tmp, queue))
            proc.start()
            report["openmined"] = queue.get(timeout=7200)
            proc.join(60)
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
