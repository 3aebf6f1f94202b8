"""Peak memory of training from Parquet with ``[data] stream = true`` against the in-memory path, at two table sizes.

    python benchmarks/stream_memory.py [--sizes 200000 1000000] [--steps 20] [--batch-size 256]

For each size it writes a bank table (ID, 7 credit-like features, the label) and a partner table (ID, 5 features)
to a temporary folder as Parquet (row groups of 65,536 rows), then, in a fresh Python process per run (so the peak
is that run's alone), builds both parties of a vertical split and trains them in that one process:

- ``stream``: parties on :class:`~vsplit.data.parquet_table.ParquetTable` (what ``stream = true`` builds): the
  preprocessing fitted by a pass over the file, the labels read as one column, the rows read per batch;
- ``memory``: parties on the tables read with :func:`~vsplit.data.sources.read_table` (``stream = false``).

Both parties share the customers in the same row order, so the run skips PSI (its memory is measured by
``benchmarks/psi.py``) and trains 1 epoch over ``steps * batch_size`` randomly chosen aligned rows: everything
that grows with the table (reading it, fitting the preprocessing, holding inputs and labels) is in the run; only the
number of training steps is capped. Peak RSS is the child process's ``VmHWM`` (``/proc/self/status``; elsewhere
``ru_maxrss``), ``*_import_rss_mb`` the same after its imports (PyTorch, pandas, scikit-learn, pyarrow);
``seconds`` is the wall time of both runs of a size, ``*_seconds`` that of building the parties and training.

Prints one JSON object: ``{"runs": [{"rows", "stream_peak_rss_mb", "memory_peak_rss_mb", "stream_seconds",
"memory_seconds", "seconds", "stream_import_rss_mb", "memory_import_rss_mb"}, ...], "load_avg": {"before",
"after"}, "steps", "batch_size"}``; ``benchmarks/results-stream-memory.json`` holds the last run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])  # the child imports this checkout's vsplit

def write_tables(folder: Path, n: int, *, seed: int = 0) -> None:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    ids = np.char.add("C", np.char.zfill(np.arange(n).astype(str), 9)).astype(object)
    jobs = ["admin", "blue-collar", "entrepreneur", "housemaid", "management", "retired", "self-employed",
            "services", "student", "technician", "unemployed", "unknown"]
    bank = pd.DataFrame({
        "customer_id": ids,
        "age": rng.integers(18, 95, n),
        "job": rng.choice(jobs, n).astype(object),
        "marital": rng.choice(["married", "single", "divorced"], n).astype(object),
        "balance": rng.normal(1500, 3000, n),
        "duration": rng.exponential(250, n),
        "campaign": rng.integers(1, 30, n),
        "housing": rng.random(n) < 0.55,
        "y": np.where(rng.random(n) < 0.12, "yes", "no").astype(object),
    })
    partner = pd.DataFrame({
        "customer_id": ids,
        "spend": rng.lognormal(5, 1.2, n),
        "transactions": rng.poisson(40, n),
        "channel": rng.choice(["web", "branch", "phone", "app"], n).astype(object),
        "tenure_months": rng.integers(0, 240, n),
        "online": rng.random(n) < 0.7,
    })
    for name, table in (("bank", bank), ("partner", partner)):
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), folder / f"{name}.parquet",
                       row_group_size=65536)


def peak_rss_mb() -> float:
    """This process's peak RSS: ``VmHWM`` (reset by exec, so not the parent's), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(folder: Path, mode: str, *, steps: int, batch_size: int) -> dict:
    """One training run in this process; returns its peak RSS."""
    import numpy as np
    import torch

    from vsplit.app.local import run_sessions
    from vsplit.app.session import Schedule, train_session
    from vsplit.data.parquet_table import ParquetTable
    from vsplit.data.sources import read_table
    from vsplit.party import FeatureParty, LabelParty
    from vsplit.topology import Topology

    torch.set_num_threads(1)
    import_rss = peak_rss_mb()
    started = time.perf_counter()
    if mode == "stream":
        bank_table = ParquetTable(folder / "bank.parquet")
        partner_table = ParquetTable(folder / "partner.parquet")
    else:
        bank_table = read_table(folder / "bank.parquet", id_column="customer_id", label="y")
        partner_table = read_table(folder / "partner.parquet", id_column="customer_id")
    bank = LabelParty("bank", bank_table, label="y", seed=1)
    partner = FeatureParty("partner", partner_table, seed=1)
    n = len(bank_table)
    rows = np.sort(np.random.default_rng(0).choice(n, size=min(n, steps * batch_size), replace=False))
    topology = Topology.vertical(label_party="bank", feature_parties=["partner"])
    schedule = Schedule(epochs=1, batch_size=batch_size, validation_fraction=0.0, patience=None, seed=0)
    run_sessions({p.name: train_session(p, topology, schedule=schedule, rows=rows) for p in (bank, partner)},
                 session=b"m" * 16)
    return {"mode": mode, "rows": n, "peak_rss_mb": round(peak_rss_mb(), 1),
            "import_rss_mb": round(import_rss, 1), "seconds": round(time.perf_counter() - started, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        folder, mode = Path(args.child[0]), args.child[1]
        if mode.startswith("write:"):
            write_tables(folder, int(mode.split(":")[1]))
            print("{}")
        else:
            print(json.dumps(child(folder, mode, steps=args.steps, batch_size=args.batch_size)))
        return
    runs = []
    load = [round(x, 2) for x in os.getloadavg()]
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            out: dict = {"rows": size}
            began = time.perf_counter()
            for mode in (f"write:{size}", "stream", "memory"):  # the tables too are written by a child
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(folder), mode, "--steps", str(args.steps),
                     "--batch-size", str(args.batch_size)], check=True, capture_output=True, text=True,
                    env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])})
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if mode.startswith("write:"):
                    began = time.perf_counter()
                    continue
                out[f"{mode}_peak_rss_mb"] = result["peak_rss_mb"]
                out[f"{mode}_seconds"] = result["seconds"]
                out[f"{mode}_import_rss_mb"] = result["import_rss_mb"]
            out["seconds"] = round(time.perf_counter() - began, 2)
            runs.append(out)
    print(json.dumps({"runs": runs, "load_avg": {"before": load, "after": [round(x, 2) for x in os.getloadavg()]},
                      "steps": args.steps, "batch_size": args.batch_size}, indent=2))


if __name__ == "__main__":
    main()
