"""Issue 47's figures: WOE/IV binning across the cut (and, later, the vertical scorecard); merges its sections into
one JSON file.

    python benchmarks/credit_scoring.py [--sections iv] [--only bank_full synthetic_100k_330 pooled] [--quick]
                                        [--key-bits 2048] [--workers 2] [--bank-full-workers 1]
                                        [--out benchmarks/results-credit-scoring.json]

Each section is a function ``section(args) -> dict`` registered in :data:`SECTIONS`; the file keeps the sections
not run this time (the scorecard's ``scorecard.*`` keys beside ``iv.*``), so a section is added by writing one
function and one line.

  iv.bank_full.seconds            `vsplit bin` on the bank_marketing preset, the bank and the partner as two OS
                                  processes over mutual TLS (PSI first, its own psi_seconds): the bank's seconds of
                                  the binning stage (fine bins, encrypted labels, the partner's per-bin sums,
                                  decryption, coarse classing, WOE and IV of every attribute); wall_seconds: both
                                  processes from start to end (Python and PyTorch imports, TLS, PSI included)
  iv.synthetic_100k_330.seconds   100,000 rows, 30 bank and 300 partner columns (FATE's benchmark shape): the same
                                  machines in one process over memory channels and the real codec, the ciphertext
                                  work on --workers processes; from fine binning to every IV; cpu_seconds_workers:
                                  the CPU time of those processes (what an idle machine would spread over its cores)
  iv.max_abs_diff_vs_pooled       the largest difference, over every attribute of the bank_marketing preset, between
                                  the WOE (per row) and IV from the encrypted counts and those optbinning computes on
                                  the pooled table with the same bins (fixed user splits)
  iv.load_average.<part>          os.getloadavg() at the start and the end of each part (the machine is shared)

``--quick``: 10,000 synthetic rows, a 1024-bit test key (a smoke run, not the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
OUT = Path(__file__).resolve().parent / "results-credit-scoring.json"


# -- iv: binning across the cut ----------------------------------------------------------------------------------------
def bank_full(args: argparse.Namespace) -> dict[str, Any]:
    """`vsplit bin` on both parties of the bank_marketing preset, two processes over mutual TLS."""
    from boosting import prepare

    from vsplit.pilot.processes import start, wait
    from vsplit.transport.ports import free_ports

    root = Path(tempfile.mkdtemp(prefix="vsplit-woe-bench-"))
    configs = prepare(root, 0)
    port = free_ports(1)[0]
    sets = ["output.run_id=woe-bank-full", f"output.dir={json.dumps(str(root / 'runs'))}",
            f"woe.key_bits={args.key_bits}", f"woe.workers={args.bank_full_workers}"]
    env_small = args.key_bits < 2048
    if env_small:
        from vsplit.config.boosting import SMALL_KEYS_ENV

        os.environ[SMALL_KEYS_ENV] = "1"
    logs = {p: root / f"{p}-bin.out" for p in configs}
    begin = time.perf_counter()
    procs = {p: start(["bin", "--config", str(c), *[x for s in [*sets, f"network.listen=127.0.0.1:{port}"
                                                                  if p == "bank" else f"network.dial=127.0.0.1:{port}"]
                                                      for x in ("--set", s)]], log=logs[p], show=False)
             for p, c in configs.items()}
    wait(procs, logs, timeout=1800, step="binning")
    wall = time.perf_counter() - begin
    out = {p: json.loads((root / "runs" / "woe-bank-full" / p / "woe.json").read_text()) for p in configs}
    bank = out["bank"]
    return {"seconds": round(bank["seconds"]["bin"], 3), "psi_seconds": round(bank["seconds"]["psi"], 3),
            "wall_seconds": round(wall, 3), "rows": bank["psi"]["intersection"],
            "partner_attributes": len(out["partner"]["iv"]), "bank_attributes": len(bank["iv"]),
            "key_bits": args.key_bits, "workers": args.bank_full_workers,
            "partner_seconds": round(out["partner"]["seconds"]["bin"], 3),
            "bytes_sent": {p: o["communication"].get("by_peer", {}) for p, o in out.items()},
            "top": [{k: t[k] for k in ("party", "attribute", "iv", "band")} for t in bank["tables"][:5]]}


def synthetic_tables(rows: int, bank_columns: int, partner_columns: int, *, seed: int = 0) -> tuple[Any, ...]:
    """Two parties' columns (normal, some integers, 5% missing) and a label that depends on a few of each."""
    rng = np.random.default_rng(seed)
    bank = rng.normal(size=(rows, bank_columns))
    partner = rng.normal(size=(rows, partner_columns))
    partner[:, ::7] = np.round(partner[:, ::7] * 3)  # some columns with few values
    logit = -2.0 + bank[:, :3] @ np.array([0.6, -0.4, 0.3]) + partner[:, :5] @ np.array([0.8, -0.5, 0.4, 0.3, -0.2])
    labels = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(float)
    for table in (bank, partner):
        table[rng.random(table.shape) < 0.05] = np.nan
    frame = {name: pd.DataFrame(t, columns=[f"{name}_{k}" for k in range(t.shape[1])])
             for name, t in (("bank", bank), ("partner", partner))}
    return labels, frame


def synthetic(args: argparse.Namespace) -> dict[str, Any]:
    """100,000 x (30 + 300) in one process: fine bins, encrypted counts, classing, every IV."""
    from vsplit.boosting.backend import ProcessBackend, SerialBackend
    from vsplit.he import generate_keypair
    from vsplit.runtime.inprocess import connect, run_machines
    from vsplit.woe import LabelWoe, PartnerWoe, fit_fine_bins

    rows = 10_000 if args.quick else 100_000
    labels, tables = synthetic_tables(rows, 30, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        keys = generate_keypair(key_bits=args.key_bits, insecure_small_key_for_tests=args.key_bits < 2048)
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    backend = ProcessBackend(workers=args.workers) if args.workers > 1 else SerialBackend()
    try:
        begin, cpu = time.perf_counter(), time.process_time()
        machines: dict[str, Any] = {}
        for name, table in tables.items():
            fine = fit_fine_bins(table, max_bins=20, party=name)
            codes = np.column_stack([f.codes(table[f.name]) for f in fine])
            machines[name] = (LabelWoe(fine, codes=codes, labels=labels, partners=["partner"], keys=keys,
                                       backend=backend) if name == "bank" else
                              PartnerWoe(fine, codes=codes, label="bank", min_key_bits=args.key_bits,
                                         insecure_small_key_for_tests=args.key_bits < 2048, backend=backend))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            report = run_machines(connect(["bank", "partner"], session=b"w" * 16), machines)["bank"]
        seconds = time.perf_counter() - begin
    finally:
        backend.close()  # the workers are joined: their CPU time is in RUSAGE_CHILDREN now
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    return {"seconds": round(seconds, 3), "cpu_seconds_this_process": round(time.process_time() - cpu, 3),
            "cpu_seconds_workers": round(workers_cpu, 3),
            "rows": rows, "bank_columns": 30, "partner_columns": 300, "key_bits": args.key_bits,
            "workers": args.workers, "attributes": len(report.tables),
            "strong_or_medium": sum(t.band in ("strong", "medium") for t in report.tables)}


def optbinning_diff(args: argparse.Namespace) -> dict[str, Any]:
    """WOE per row and IV from the encrypted counts against optbinning on the pooled bank_marketing table."""
    from optbinning import OptimalBinning

    from vsplit.datasets import preset
    from vsplit.woe import information_value

    data = preset("bank_marketing", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = information_value(data.train, label=data.label, positive_label=data.positive_label,
                                categorical=data.categorical, alignment="join", key_bits=args.key_bits,
                                insecure_small_key_for_tests=args.key_bits < 2048, share_names=True)
    pooled = data.train["bank"].merge(data.train["partner"], on=data.id_column)
    y = (pooled[data.label].astype(str) == str(data.positive_label)).to_numpy(dtype=int)
    worst, per, skipped = 0.0, {}, []
    for party, binning in out.binnings.items():
        for woe_map in binning.maps:
            if woe_map.n_coarse <= 2:  # a single value bin: optbinning cannot build a table without a split
                skipped.append(f"{party}.{woe_map.name}")
                continue
            ob = _optbinning(OptimalBinning, woe_map, pooled[woe_map.name], y)
            table = ob.binning_table.build()
            rows = table.iloc[:-1]  # the Totals row apart
            ours = np.asarray(woe_map.woe)
            diffs = [abs(float(ob.binning_table.iv) - binning.iv[woe_map.name])]
            for at, (label, woe, count) in enumerate(zip(rows["Bin"], rows["WoE"], rows["Count"], strict=True)):
                if isinstance(label, str) and label == "Special":
                    continue
                k = _coarse_index(woe_map, label, at)
                assert count == 0 or k is not None, (woe_map.name, label)
                diffs.append(abs(float(woe or 0.0) - (ours[k] if k is not None else 0.0)))
            per[f"{party}.{woe_map.name}"] = max(diffs)
            worst = max(worst, max(diffs))
    return {"max_abs_diff": worst, "per_attribute": per, "one_bin_skipped": skipped,
            "optbinning": _version("optbinning")}


def _coarse_index(woe_map: Any, label: Any, at: int) -> int | None:
    """Our coarse bin of row ``at`` of optbinning's table (numbers: in order; categories: by category)."""
    fine, coarse = woe_map.fine, np.asarray(woe_map.coarse_of_fine)
    if isinstance(label, str) and label == "Missing":
        return int(coarse[-1])
    if fine.kind == "numeric":
        return at
    categories = list(label)
    if not categories:
        return None
    index = dict(zip(fine.categories, fine.category_bin, strict=True))
    return int(coarse[index[str(categories[0])]])


def _optbinning(cls: Callable[..., Any], woe_map: Any, x: pd.Series, y: np.ndarray) -> Any:
    """optbinning with our coarse bins as fixed user splits (its bins are [a, b); ours (a, b])."""
    fine, coarse = woe_map.fine, np.asarray(woe_map.coarse_of_fine)
    values = fine.n_bins - 1
    if fine.kind == "numeric":
        cuts = [fine.edges[k] for k in range(values - 1) if coarse[k] != coarse[k + 1]]
        splits = np.nextafter(np.asarray(cuts, dtype=np.float64), np.inf)
        ob = cls(name=fine.name, dtype="numerical", user_splits=splits, user_splits_fixed=[True] * len(splits),
                 min_prebin_size=1e-9, monotonic_trend=None)
        return ob.fit(pd.to_numeric(x).to_numpy(dtype=float), y)
    groups = [[c for c, b in zip(fine.categories, fine.category_bin, strict=True) if coarse[b] == g]
              for g in range(int(coarse[:values].max()) + 1)]
    groups = [g for g in groups if g]
    ob = cls(name=fine.name, dtype="categorical", user_splits=groups, user_splits_fixed=[True] * len(groups),
             min_prebin_size=1e-9, monotonic_trend=None, cat_cutoff=None)
    return ob.fit(x.astype(str).where(x.notna(), np.nan).to_numpy(dtype=object), y)


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def iv_section(args: argparse.Namespace) -> dict[str, Any]:
    """The ``iv`` section: bank_full, synthetic_100k_330, max_abs_diff_vs_pooled (``--only``: some of them; the
    others stay as the file has them)."""
    out: dict[str, Any] = {}
    for part in args.only:
        load = [round(v, 2) for v in os.getloadavg()]
        if part == "pooled":
            diff = optbinning_diff(args)
            out["max_abs_diff_vs_pooled"] = diff["max_abs_diff"]
            out["vs_pooled"] = diff
        else:
            out[part] = {"bank_full": bank_full, "synthetic_100k_330": synthetic}[part](args)
        out.setdefault("load_average", {})[part] = {"start": load, "end": [round(v, 2) for v in os.getloadavg()]}
    return out


#: section name -> function; the scorecard adds its own
SECTIONS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {"iv": iv_section}
from credit_scoring_scorecard import scorecard_section  # noqa: E402  (the scorecard's section, its own file)

SECTIONS["scorecard"] = scorecard_section


def merge(path: Path, name: str, value: dict[str, Any]) -> dict[str, Any]:
    """Write section ``name`` into the JSON at ``path``, keeping the other sections (and the keys of this one not
    measured this time)."""
    from vsplit.atomic import write_atomic

    data = json.loads(path.read_text()) if path.is_file() else {}
    old = data.get(name, {})
    data[name] = {**old, **value, "load_average": {**old.get("load_average", {}), **value.get("load_average", {})}}
    write_atomic(path, (json.dumps(data, indent=2) + "\n").encode())
    return data


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--quick", action="store_true", help="a smoke run: small data, a test key")
    parser.add_argument("--key-bits", type=int, default=None, help="default 2048 (1024 with --quick)")
    parser.add_argument("--workers", type=int, default=2, help="processes for the synthetic run's ciphertext work")
    parser.add_argument("--bank-full-workers", type=int, default=1, help="woe.workers of the two-process run")
    parser.add_argument("--only", nargs="+", default=["bank_full", "synthetic_100k_330", "pooled"],
                        choices=["bank_full", "synthetic_100k_330", "pooled"], help="parts of the iv section")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.key_bits is None:
        args.key_bits = 1024 if args.quick else 2048
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    data: dict[str, Any] = {}
    for name in args.sections:
        data = merge(args.out, name, SECTIONS[name](args))
    print(json.dumps({n: data[n] for n in args.sections}, indent=2))
    return data


if __name__ == "__main__":
    main()
