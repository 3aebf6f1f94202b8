"""What resumable PSI costs and saves: a two-party bucketed PSI in one process, plain, with its progress kept on disk,
and killed when half its buckets are finished then rerun from them. Prints one JSON object.

    python benchmarks/psi_resume.py --size 200000 --buckets 16

Keys: ``plain_s`` (no state kept), ``kept_s`` (progress kept; ``overhead`` = kept_s / plain_s - 1), ``state_mb``
(the largest size the state folders reached), ``killed_after_buckets`` and ``rerun_s`` (the rerun after the kill;
``rerun_fraction`` = rerun_s / kept_s), and ``same_intersection`` (the rerun found exactly the plain run's rows).
Both parties share this process, so the seconds are CPU-bound curve work for both; compare them within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from vsplit.psi import IdPolicy, LabelParty, Partner, PsiConfig
from vsplit.runtime.inprocess import connect, run_machines


def _tables(size: int, seed: int) -> dict[str, list[str]]:
    rng = np.random.default_rng(seed)
    pool = rng.choice(size * 4, size=size * 2, replace=False)
    return {"bank": [f"c{x}" for x in pool[:size]], "shop": [f"c{x}" for x in pool[size // 2 : size // 2 + size]]}


def _machines(tables, config, root):
    policy = IdPolicy()
    bank = LabelParty(tables["bank"], partners=["shop"], config=config, policy=policy,
                      state_dir=None if root is None else root / "bank")
    shop = Partner(tables["shop"], label_party="bank", config=config, policy=policy,
                   state_dir=None if root is None else root / "shop")
    return {"bank": bank, "shop": shop}


def _folder_mb(root: Path) -> float:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 2**20


def _run(tables, config, root, *, kill_at: int | None = None):
    machines = _machines(tables, config, root)
    pumps = connect(list(machines), session=os.urandom(16), links=[("bank", "shop")])
    began = time.perf_counter()
    if kill_at is None:
        out = run_machines(pumps, machines)
        return out, time.perf_counter() - began, machines
    for name, machine in machines.items():
        pumps[name].begin(machine)
    pair = machines["bank"]._pairs["shop"]
    while pair.finished < kill_at:
        for name in machines:
            pumps[name].poll()
    return None, time.perf_counter() - began, machines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000, help="IDs per party (half of them shared)")
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tables = _tables(args.size, args.seed)
    config = PsiConfig(buckets=args.buckets)
    root = Path(tempfile.mkdtemp(prefix="vsplit-psi-resume-"))
    try:
        plain, plain_s, _ = _run(tables, config, None)
        kept, kept_s, _ = _run(tables, config, root / "kept")
        state_mb = _folder_mb(root / "kept")  # the whole run's state, just before the caller would forget it
        half = args.buckets // 2
        _, killed_s, _ = _run(tables, config, root / "cut", kill_at=half)
        again, rerun_s, resumed = _run(tables, config, root / "cut")
        same = sorted(again["bank"].ids) == sorted(plain["bank"].ids) == sorted(kept["bank"].ids)
        print(json.dumps({
            "size": args.size, "buckets": args.buckets, "intersection": len(plain["bank"].ids),
            "plain_s": round(plain_s, 2), "kept_s": round(kept_s, 2), "overhead": round(kept_s / plain_s - 1, 3),
            "state_mb": round(state_mb, 1), "killed_after_buckets": half, "killed_at_s": round(killed_s, 2),
            "resumed_from": resumed["bank"]._pairs["shop"].resumed_from, "rerun_s": round(rerun_s, 2),
            "rerun_fraction": round(rerun_s / kept_s, 3), "same_intersection": same,
            "load_avg": [round(x, 2) for x in os.getloadavg()],
        }, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
