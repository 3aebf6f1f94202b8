"""Vertical boosting at a million rows: seconds a tree and peak memory per party (``scale`` in results-boosting.json).

    python benchmarks/boosting_scale.py [--rows 1000000] [--columns 50] [--trees 2] [--depth 5] [--goss 0.1 0.1]

A bank (``columns`` numeric columns and the label) and a partner (``columns`` more) as two OS processes joined by the
mutual-TLS channels of :mod:`vsplit.transport`, each running its machine of :mod:`vsplit.boosting` over a
:class:`~vsplit.runtime.pump.Pump`, 2048-bit OU. The rows are aligned already (seeded synthetic rows, the same IDs in
the same order on both sides: no PSI, whose cost at this size ``benchmarks/psi.py`` measures); each party makes its
own columns from its own seed and bins them on its own rows (32 bins). The label depends on five columns of each
party. GOSS keeps 10 % + 10 % of the rows per tree: one ciphertext message carries at most 64 MiB, about 250,000
OU-2048 ciphertexts, so a tree of a million rows needs a sample (or several messages, which the protocol does not
send yet). ``seconds_per_tree``: the training's wall time over the trees, key exchange included; ``peak_rss_mb``:
each party process's ``ru_maxrss``; ``cpu_seconds``: each one's CPU time (sf-heu's threads included).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

BINS = 32


def columns(rows: int, count: int, seed: int, party: int) -> Any:
    """A party's synthetic columns (float32): the first five carry the signal."""
    import numpy as np

    return np.random.default_rng([seed, party]).normal(size=(rows, count)).astype(np.float32)


def labels(rows: int, seed: int) -> Any:
    """0/1 labels from the first five columns of both parties (each regenerated from its seed, then dropped)."""
    import numpy as np

    logit = np.zeros(rows)
    weights = np.array([1.0, -0.8, 0.6, -0.4, 0.2])
    for party in (0, 1):
        logit += np.random.default_rng([seed, party]).normal(size=(rows, 5)) @ weights
    return (np.random.default_rng([seed, 9]).random(rows) < 1 / (1 + np.exp(-logit))).astype(np.float64)


def party(role: str, spec: dict[str, Any], results: Any) -> None:
    """One party's process: its columns and bins, the channel, the machine; reports seconds and peak memory."""
    import warnings

    import numpy as np

    from vsplit.boosting import BoostParams, LabelBoost, PartnerBoost, fit_bins
    from vsplit.runtime.pump import Pump
    from vsplit.transport.connect import open_channels

    try:
        rows, seed = spec["rows"], spec["seed"]
        index = 0 if role == "bank" else 1
        first = columns(rows, 5, seed, index)  # the same stream: the first five columns, then the others
        rest = np.random.default_rng([seed, index, 1]).normal(size=(rows, spec["columns"] - 5)).astype(np.float32)
        values = np.hstack([first, rest])
        del first, rest
        bins = fit_bins(values, max_bins=BINS)
        codes = bins.transform(values).astype(np.uint8)
        del values
        peer = "partner" if role == "bank" else "bank"
        files = spec["identities"]
        channels = open_channels(role, role="listen" if role == "bank" else "dial", address=("127.0.0.1", spec["port"]),
                                 own_cert=files[role]["cert"], own_key=files[role]["key"],
                                 peers={peer: files[peer]["cert"]}, deadline_s=120)
        pump = Pump(role, channels, session=spec["session"], timeout=3600)
        top, other = spec["goss"]
        params = BoostParams(trees=spec["trees"], max_depth=spec["depth"], goss_top_rate=top, goss_other_rate=other,
                             seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # only a test key (--key-bits under 2048) warns
            small = spec["key_bits"] < 2048
            if role == "bank":
                machine: Any = LabelBoost(codes, width=bins.width, labels=labels(rows, seed), partners=[peer],
                                          params=params, key_bits=spec["key_bits"],
                                          insecure_small_key_for_tests=small)
            else:
                machine = PartnerBoost(codes, width=bins.width, label=peer, min_key_bits=spec["key_bits"],
                                       insecure_small_key_for_tests=small)
            began, cpu = time.perf_counter(), time.process_time()
            pump.run(machine)
        seconds = time.perf_counter() - began
        for channel in channels.values():
            channel.close()
        results.put({"role": role, "seconds": seconds, "cpu_seconds": time.process_time() - cpu,
                     "work": dict(machine.seconds),
                     "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
    except BaseException as exc:
        results.put({"role": role, "error": f"{type(exc).__name__}: {exc}"})
        raise


def run(*, rows: int = 1_000_000, columns: int = 50, trees: int = 2, depth: int = 5,
        goss: tuple[float, float] = (0.1, 0.1), key_bits: int = 2048, seed: int = 0) -> dict[str, Any]:
    """The two parties' processes; their figures."""
    from vsplit.transport.identity import create_identity, write_identity

    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="vsplit-boosting-scale-") as tmp:
        spec: dict[str, Any] = {"rows": rows, "columns": columns, "trees": trees, "depth": depth, "goss": list(goss),
                                "key_bits": key_bits, "seed": seed, "session": os.urandom(16), "port": _free_port(),
                                "identities": {}}
        for name in ("bank", "partner"):
            files = write_identity(create_identity(name), Path(tmp) / name)
            spec["identities"][name] = {"cert": str(files.cert_path), "key": str(files.key_path)}
        results = ctx.Queue()
        procs = [ctx.Process(target=party, args=(role, spec, results)) for role in ("bank", "partner")]
        for p in procs:
            p.start()
        got: dict[str, Any] = {}
        while len(got) < 2:
            item = results.get(timeout=7200)
            if "error" in item:
                for p in procs:
                    p.kill()
                raise RuntimeError(f"scale: {item['role']} failed: {item['error']}")
            got[item["role"]] = item
        for p in procs:
            p.join(60)
    seconds = got["bank"]["seconds"]
    return {"mode": "two_processes_mutual_tls", "psi": "none (rows aligned already)", "rows": rows,
            "columns_per_party": columns, "trees": trees, "depth": depth, "goss": list(goss),
            "seconds": round(seconds, 1), "seconds_per_tree": round(seconds / trees, 1),
            "peak_rss_mb": {r: got[r]["peak_rss_mb"] for r in ("bank", "partner")},
            "cpu_seconds": {r: round(got[r]["cpu_seconds"], 1) for r in ("bank", "partner")},
            "split_s": {"encryption": round(got["bank"]["work"].get("encryption", 0.0), 1),
                        "histograms": round(got["partner"]["work"].get("histograms", 0.0), 1),
                        "decryption": round(got["bank"]["work"].get("decryption", 0.0), 1)}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--columns", type=int, default=50)
    parser.add_argument("--trees", type=int, default=2)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--goss", type=float, nargs=2, default=[0.1, 0.1])
    parser.add_argument("--key-bits", type=int, default=2048)
    args = parser.parse_args()
    print(json.dumps(run(rows=args.rows, columns=args.columns, trees=args.trees, depth=args.depth,
                         goss=tuple(args.goss), key_bits=args.key_bits), indent=1))


if __name__ == "__main__":
    main()
