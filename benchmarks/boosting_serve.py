"""Serving latency of a boosted-trees model: the bank's HTTP service and the partner's daemon as separate processes.

    python benchmarks/boosting_serve.py [--quick] [--single 2000] [--seconds 8] [--concurrency 8]
                                        [--out benchmarks/results-boosting.json]

Trains a boosting model on the bundled ``bank_marketing`` preset (bank-full: the bank holds the profile and the
label, the partner the campaign's calls; depth 5, learning rate 0.3, 32 bins, GOSS 0.2 / 0.1, a 2048-bit OU key,
``TREES`` trees, no early stopping) with both nodes in this process over memory channels, then starts ``vsplit
serve`` for the partner (its daemon) and the bank (HTTP on 127.0.0.1) as separate OS processes over mutual TLS on
loopback, and loads ``POST /v1/score`` with benchmarks/serving.py's client (:mod:`http_client`, in this process).
All three share the machine's cores. Live mode: one partner round trip a micro-batch (the partner's decision bits of
every recorded split); cached: the bank holds every customer's bits from the partner's snapshot.

:func:`run` returns (and ``main`` prints, then merges under ``"serve"`` into ``--out`` keeping its other keys):

  live.p50_ms / p99_ms / requests / concurrency   one request at a time (concurrency 1), live mode
  live.load.*                                     ``--concurrency`` clients for ``--seconds``: throughput, latency
  live.max_abs_diff_vs_batch                      the service's scores against ``vsplit predict``'s (every test row)
  cached.*                                        the same with the bank restarted in cached mode
  trees / depth / partner_records                 the model served
  load_average                                    ``os.getloadavg()`` at the start and the end (a shared machine)

``--quick``: 8 trees, 300 single requests, 3 s of load (a smoke run, not the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving import in_threads  # benchmarks/ is on the path (above)

REPO = Path(__file__).resolve().parents[1]
TREES, QUICK_TREES, DEPTH = 40, 8, 5
RUN = "serve-trees"


def prepare(root: Path, *, http: int, link: int, trees: int) -> list[str]:
    """The preset's bank and partner folders under ``root``; the overrides every command of this run takes."""
    from vsplit.datasets import preset
    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.orchestrate import VERTICAL, pilot_data
    from vsplit.pilot.prepare import ensure_keys, export_tables

    data = preset("bank_marketing", seed=0)
    write_missing_configs(root / "parties", label=data.label, positive_label=data.positive_label, kind="vertical",
                          roles=dict(VERTICAL))
    export_tables(pilot_data(data, "vertical"), root / "parties")
    ensure_keys(root / "parties", list(VERTICAL))
    return [f"output.run_id={RUN}", f"output.dir={json.dumps(str(root / 'runs'))}", "model.kind=boosting",
            f"boosting.trees={trees}", f"boosting.max_depth={DEPTH}", "boosting.learning_rate=0.3",
            "boosting.max_bins=32", "boosting.key_bits=2048", "boosting.goss_top_rate=0.2",
            "boosting.goss_other_rate=0.1", "train.seed=0", f"serve.address=127.0.0.1:{link}",
            f"serve.http=127.0.0.1:{http}", "serve.timeout_ms=2000"]


def request_rows(root: Path) -> list[dict]:
    """The bank's test customers as scoring requests (``{"id", "features"}``, its own columns)."""
    test = pd.read_parquet(root / "parties" / "bank" / "data" / "test.parquet")
    columns = [c for c in test.columns if c not in ("customer_id", "y")]
    return [{"id": str(r["customer_id"]), "features": {c: r[c] for c in columns}}
            for r in json.loads(test.to_json(orient="records"))]


def train_and_predict(root: Path, sets: list[str]) -> pd.DataFrame:
    """Train in this process (both nodes, memory channels), then batch-predict the bank's test table."""
    from vsplit.config import load_config
    from vsplit.node import PartyNode
    from vsplit.transport.memory import memory_pair

    def nodes(*more: str) -> dict[str, Any]:
        return {p: PartyNode(load_config(root / "parties" / p / "party.toml", overrides=[*sets, *more]),
                             progress=False) for p in ("bank", "partner")}

    hub, end = memory_pair()
    trained = nodes('data.test_path=""')
    in_threads({"bank": lambda: trained["bank"].run({"partner": hub}),
              "partner": lambda: trained["partner"].run({"bank": end})})
    hub, end = memory_pair()
    scoring = nodes()
    test = {p: root / "parties" / p / "data" / "test.parquet" for p in ("bank", "partner")}
    paths = in_threads({p: (lambda p=p, c=c: scoring[p].predict(test[p], channels=c))
                      for p, c in (("bank", {"partner": hub}), ("partner", {"bank": end}))})
    return pd.read_csv(paths["bank"], dtype={"customer_id": str})


def start(root: Path, party: str, sets: list[str], *more: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "vsplit.cli.main", "serve", "--config", str(root / "parties" / party / "party.toml"),
            "--quiet"]
    for item in [*sets, *more]:
        args += ["--set", item]
    log = open(root / f"{party}-{time.time_ns()}.log", "w")  # the child owns it from here
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def max_diff(served: pd.DataFrame, batch: pd.DataFrame) -> float:
    """The largest difference of a scored customer's served and batch score (the others: no score in both)."""
    both = served.merge(batch, left_on="id", right_on="customer_id", validate="one_to_one")
    scored = both["status"] == "scored"
    if len(both) != len(batch) or not (both.loc[scored, "model_x"] == "split").all() or \
            not both.loc[~scored, "score"].isna().all():
        raise AssertionError(f"served {len(served)} rows, batch {len(batch)}, matched {len(both)}; batch status "
                             f"{batch['status'].value_counts().to_dict()}; served models "
                             f"{served['model'].value_counts(dropna=False).to_dict()}")
    return float((both.loc[scored, "score"] - both.loc[scored, "probability"]).abs().max())


def measure(base: str, rows: list[dict], batch: pd.DataFrame, procs: dict[str, subprocess.Popen], *,
            single_n: int, seconds: float, concurrency: int, diff_of: Any = None, reasons: int = 0,
            reasons_n: int = 100) -> dict[str, Any]:
    """One request at a time, then ``concurrency`` clients, against the running service (``diff_of(served,
    batch)``: how far the served scores are from ``vsplit predict``'s, default :func:`max_diff`); with ``reasons``,
    also ``reasons_n`` requests one at a time asking that many reason codes of applicants the split scores."""
    import serving as s

    asyncio.run(s.wait_ready(base))
    diff = (diff_of or max_diff)(asyncio.run(s.score_all(base, rows)), batch)
    one = s.run(s.server_view(base, s.single(base, rows, single_n)))
    loaded = s.run(s.server_view(base, s.load(base, rows, seconds=seconds, concurrency=concurrency,
                                              pids=s.pids(procs))))
    loaded.pop("side")
    out = {"p50_ms": one["p50_ms"], "p99_ms": one["p99_ms"], "requests": one["n"], "concurrency": 1,
           "mean_ms": one["mean_ms"], "server_p99_le_ms": one["server_p99_le_ms"], "load": loaded,
           "max_abs_diff_vs_batch": diff}
    if reasons:
        scored = set(batch.loc[batch["status"] == "scored", "customer_id"].astype(str))
        asked = [{**r, "reasons": reasons} for r in rows if str(r["id"]) in scored]
        why = s.run(s.single(base, asked, reasons_n))
        out["reasons"] = {"k": reasons, "p50_ms": why["p50_ms"], "p99_ms": why["p99_ms"], "requests": why["n"],
                          "over_score_p50": round(why["p50_ms"] / one["p50_ms"], 1)}
    return out


def live_then_cached(root: Path, sets: list[str], base: str, rows: list[dict], batch: pd.DataFrame, *,
                     single_n: int, seconds: float, concurrency: int, diff_of: Any = None,
                     reasons: tuple[int, int] = (0, 0), reasons_n: int = 100) -> dict[str, Any]:
    """Serve the run of ``sets`` (the partner's daemon from its test table, the bank's HTTP service at ``base``) and
    :func:`measure` it live, then with the bank restarted in cached mode; ``{"live": ..., "cached": ...}``
    (``reasons``: the reason codes asked in each mode, 0 for none)."""
    out: dict[str, Any] = {}
    # the partner serves its table of the customers the bank scores (its test table)
    procs = {"partner": start(root, "partner", sets, 'serve.table="data/test.parquet"'),
             "bank": start(root, "bank", sets)}
    try:
        out["live"] = measure(base, rows, batch, procs, single_n=single_n, seconds=seconds, concurrency=concurrency,
                              diff_of=diff_of, reasons=reasons[0], reasons_n=reasons_n)
        procs["bank"].send_signal(signal.SIGTERM)
        procs["bank"].wait(timeout=60)
        procs["bank"] = start(root, "bank", sets, "serve.mode=cached")
        out["cached"] = measure(base, rows, batch, procs, single_n=single_n, seconds=seconds, concurrency=concurrency,
                                diff_of=diff_of, reasons=reasons[1], reasons_n=reasons_n)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    return out


def run(quick: bool = False, *, single_n: int | None = None, seconds: float | None = None,
        concurrency: int = 8) -> dict[str, Any]:
    """Train, serve live then cached, measure; the figures (see the module docstring)."""
    from vsplit.transport.ports import free_ports

    trees = QUICK_TREES if quick else TREES
    single_n = single_n or (300 if quick else 2000)
    seconds = seconds or (3.0 if quick else 8.0)
    result: dict[str, Any] = {"load_average": {"start": [round(v, 2) for v in os.getloadavg()]},
                              "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="vsplit-boost-serve-") as tmp:
        root = Path(tmp)
        http, link = free_ports(2)
        sets = prepare(root, http=http, link=link, trees=trees)
        began = time.perf_counter()
        batch = train_and_predict(root, sets)
        result["train_seconds"] = round(time.perf_counter() - began, 1)
        rows = request_rows(root)
        result.update(live_then_cached(root, sets, f"http://127.0.0.1:{http}", rows, batch, single_n=single_n,
                                       seconds=seconds, concurrency=concurrency))
        from vsplit.runtime.checkpoint import load_checkpoint

        model = load_checkpoint(root / "runs" / RUN / "bank" / "model.npz", run_id=RUN, party="bank")
        splits = model["splits"]
    result["trees"] = int(model["n_trees"])
    result["depth"] = DEPTH
    result["partner_records"] = int((splits[:, 2] == 1).sum())
    result["rows_scored"] = len(rows)
    result["load_average"]["end"] = [round(v, 2) for v in os.getloadavg()]
    result["settings"] = {"quick": quick, "key_bits": 2048, "goss": [0.2, 0.1], "bins": 32, "learning_rate": 0.3,
                          "workers": 2, "max_batch": 256, "client": "benchmarks/http_client.py (benchmarks/"
                          "serving.py's load generator), in the benchmark's process"}
    return result


def merge(out: Path, serve: dict[str, Any]) -> None:
    """``serve`` under key ``"serve"`` of ``out``, its other keys kept (read, modify, write atomically)."""
    from vsplit.atomic import save_with

    previous = json.loads(out.read_text()) if out.is_file() else {}
    previous["serve"] = serve
    text = json.dumps(previous, indent=1)  # as benchmarks/boosting.py writes it
    save_with(out, lambda h: h.write(text.encode() + b"\n"))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--single", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results-boosting.json"))
    args = parser.parse_args(argv)
    result = run(args.quick, single_n=args.single, seconds=args.seconds, concurrency=args.concurrency)
    print(json.dumps(result, indent=2))
    merge(Path(args.out), result)
    return result


if __name__ == "__main__":
    main()
