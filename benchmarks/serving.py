"""Online scoring latency and throughput: the bank's HTTP service and a partner's daemon as separate processes.

    python benchmarks/serving.py [--seconds 10] [--single 2000] [--concurrency 32] [--out FILE.json]

Trains two versions (``v1``, ``v2``) of a bank + partner vertical split on the bundled UCI bank sample (one epoch,
in one process), starts ``vsplit serve`` for the partner (its daemon) and the bank (HTTP on 127.0.0.1, up to 2
micro-batches in flight of up to 256 rows) as separate OS processes over mutual TLS on loopback, and loads the API
from an asyncio HTTP/1.1 client in this process (:mod:`http_client`: one keep-alive connection per concurrent client,
requests prebuilt as bytes, uvloop when installed). Every process shares the same 2 cores, the load generator
included. Prints ONE JSON object and writes it to ``--out``:

  live.single.p50_ms / p99_ms       one request at a time (``--single`` requests), POST /v1/score, live mode
  live.load.throughput_rps / p99_ms ``--concurrency`` clients for ``--seconds``: scored requests per second, latency
                                    (at the client); ``server_p50_le_ms`` / ``server_p99_le_ms``: the bucket bound of
                                    the bank's own histogram (request in to answer out) under which they fall;
                                    ``cpu_cores``: CPU seconds per second of the run of the client, bank, partner
  cached.single.* / cached.load.*   the same with the bank restarted in cached mode (partner's snapshot held)
  swap.failed_requests              non-200 answers while ``POST /v1/models {"run_id": "v2"}`` switches the version
                                    under the live load (and ``swap.requests``, ``swap.seconds``)
  partner_down.status / .ms         the answer when the partner hangs (SIGSTOP), with serve.timeout_ms = 1000
  *.max_abs_diff_vs_batch           the service's scores of every test customer against ``vsplit predict``'s
  load_average                      ``os.getloadavg()`` at the start and the end (the machine is shared)
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
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.transport.ports import free_ports

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_client import Connection
from http_client import post as post_bytes

REPO = Path(__file__).resolve().parents[1]
COLUMNS = {"bank": ["age", "job", "marital", "education", "balance", "housing", "loan", "y"],
           "partner": ["default", "contact", "day", "month", "campaign", "pdays", "previous", "poutcome"]}

_BANK = """[party]
name = "bank"
role = "label"
[data]
path = "data/train.parquet"
label = "y"
positive_label = "yes"
[network]
listen = "127.0.0.1:1"
key = "keys/bank.key"
cert = "keys/bank.pem"
peers = {{ partner = "keys/peers/partner.pem" }}
[train]
epochs = 1
seed = {seed}
[output]
dir = "../runs"
run_id = "v1"
baselines = false
[serve]
address = "127.0.0.1:{link}"
http = "127.0.0.1:{http}"
timeout_ms = 1000
"""
_PARTNER = """[party]
name = "partner"
role = "feature"
[data]
path = "data/train.parquet"
[network]
dial = "127.0.0.1:1"
key = "keys/partner.key"
cert = "keys/partner.pem"
peers = {{ bank = "keys/peers/bank.pem" }}
[train]
epochs = 1
seed = {seed}
[output]
dir = "../runs"
run_id = "v1"
[serve]
address = "127.0.0.1:{link}"
table = "data/test.parquet"
reload_s = 1.0
runs = ["v1", "v2"]
"""


def prepare(root: Path, *, http: int, link: int) -> None:
    from vsplit.datasets import load
    from vsplit.datasets.partition import partition_train_test
    from vsplit.pilot.prepare import ensure_keys, export_tables

    source = load("bank")
    tables = partition_train_test(source, columns=COLUMNS, label_party="bank", label="y", seed=0)
    export_tables(tables, root)
    ensure_keys(root, list(COLUMNS))
    (root / "bank" / "party.toml").write_text(_BANK.format(seed=0, http=http, link=link))
    (root / "partner" / "party.toml").write_text(_PARTNER.format(seed=0, link=link))


def in_threads(work: dict[str, Any]) -> dict[str, Any]:
    """Run each of ``work``'s callables in its own thread; their results by name (the first error re-raised)."""
    out: dict[str, Any] = {}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            out[name] = work[name]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def train_and_predict(root: Path, run_id: str, seed: int) -> pd.DataFrame:
    """Train ``run_id`` in one process (both nodes, memory channels), then batch-predict the test customers."""
    from vsplit.config import load_config
    from vsplit.node import PartyNode
    from vsplit.transport.memory import memory_pair

    def nodes(*overrides: str) -> dict[str, Any]:
        return {p: PartyNode(load_config(root / p / "party.toml", overrides=[f"output.run_id={run_id}",
                                                                           f"train.seed={seed}", *overrides]),
                             progress=False) for p in COLUMNS}

    hub, end = memory_pair()
    trained = nodes()
    in_threads({"bank": lambda: trained["bank"].run({"partner": hub}),
              "partner": lambda: trained["partner"].run({"bank": end})})
    hub, end = memory_pair()
    scoring = nodes()
    paths = in_threads({p: (lambda p=p, c=c: scoring[p].predict(root / p / "data" / "test.parquet", channels=c))
                      for p, c in (("bank", {"partner": hub}), ("partner", {"bank": end}))})
    return pd.read_csv(paths["bank"], dtype={"customer_id": str})


#: the bank's model-management token (serve.manage_token_file), for the swap
MANAGE = "m" * 32


def start(root: Path, party: str, *sets: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "vsplit.cli.main", "serve", "--config", str(root / party / "party.toml"),
            "--run-id", "v1", "--quiet"]
    for item in sets:
        args += ["--set", item]
    log = open(root / f"{party}-{time.time_ns()}.log", "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


async def wait_ready(base: str, timeout: float = 120) -> None:
    import aiohttp

    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(f"{base}/healthz") as reply:
                    if reply.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("the service did not become ready")


def _requests(base: str, rows: list[dict]) -> list[bytes]:
    """``POST /v1/score`` of each row, prebuilt as bytes (the client then only writes and reads)."""
    host = base.split("://", 1)[1]
    return [post_bytes(host, "/v1/score", json.dumps(r).encode()) for r in rows]


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of process ``pid`` so far (``None``: this one)."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def single(base: str, rows: list[dict], n: int) -> dict[str, float]:
    host, port = base.split("://", 1)[1].split(":")
    requests = _requests(base, rows)
    conn = await Connection.open(host, int(port))
    latencies = []
    try:
        for i in range(n + 50):
            began = time.perf_counter()
            status, body = await conn.send(requests[i % len(requests)])
            assert status == 200, body
            if i >= 50:  # warm-up left out
                latencies.append(time.perf_counter() - began)
    finally:
        conn.close()
    return _stats(latencies)


async def load(base: str, rows: list[dict], *, seconds: float, concurrency: int, during: Any = None,
               pids: dict[str, int] | None = None) -> dict[str, Any]:
    """``concurrency`` clients for ``seconds``; ``during``: a coroutine run once, half a second in; ``pids``: the
    processes whose CPU use is reported (``cpu_cores``: CPU seconds per second of the run, this process as
    ``client``)."""
    host, port = base.split("://", 1)[1].split(":")
    requests = _requests(base, rows)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    conns = [await Connection.open(host, int(port)) for _ in range(concurrency)]
    stop = time.monotonic() + seconds

    async def client(k: int) -> None:
        conn, i = conns[k], k
        while time.monotonic() < stop:
            began = time.perf_counter()
            try:
                status, _ = await conn.send(requests[i % len(requests)])
            except OSError:
                status = -1
                conn = conns[k] = await Connection.open(host, int(port))
            latencies.append(time.perf_counter() - began)
            statuses[status] = statuses.get(status, 0) + 1
            i += concurrency

    async def side() -> Any:
        await asyncio.sleep(0.5)
        return await during if during is not None else None

    watched = {"client": None, **(pids or {})}
    cpu = {name: cpu_seconds(pid) for name, pid in watched.items()}
    began = time.perf_counter()
    try:
        results = await asyncio.gather(*(client(k) for k in range(concurrency)), side())
    finally:
        for conn in conns:
            conn.close()
    elapsed = time.perf_counter() - began
    cores = {name: round((cpu_seconds(pid) - cpu[name]) / elapsed, 2) for name, pid in watched.items()}
    ok = statuses.get(200, 0)
    return {"throughput_rps": round(ok / elapsed, 1), **_stats(latencies), "requests": sum(statuses.values()),
            "failed_requests": sum(v for k, v in statuses.items() if k != 200),
            "statuses": {str(k): v for k, v in sorted(statuses.items())}, "concurrency": concurrency,
            "seconds": round(elapsed, 2), "cpu_cores": cores, "side": results[-1]}


async def post(base: str, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any, float]:
    import aiohttp

    began = time.perf_counter()
    async with aiohttp.ClientSession() as session, session.post(f"{base}{path}", json=body, headers=headers) as reply:
        return reply.status, await reply.json(), round((time.perf_counter() - began) * 1000, 1)


async def server_histogram(base: str) -> dict[str, float]:
    """The bank's own latency histogram of POST /v1/score (cumulative counts by bucket bound, seconds)."""
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"{base}/metrics") as reply:
        text = await reply.text()
    out = {}
    for line in text.splitlines():
        if line.startswith("vsplit_serve_request_seconds_bucket") and 'path="/v1/score"' in line:
            bound = line.split('le="')[1].split('"')[0]
            out[bound] = float(line.rsplit(" ", 1)[1])
    return out


def server_quantile(before: dict[str, float], after: dict[str, float], q: float) -> float | None:
    """The upper bucket bound (ms) under which fraction ``q`` of the requests between two histograms took, as the
    bank measured them (from receiving the request to sending the answer): what the service adds, without the
    client's own queueing."""
    bounds = sorted(after, key=lambda b: float("inf") if b == "+Inf" else float(b))
    total = after["+Inf"] - before.get("+Inf", 0.0)
    for b in bounds:
        if after[b] - before.get(b, 0.0) >= q * total:
            return None if b == "+Inf" else round(float(b) * 1000, 3)
    return None


async def server_view(base: str, work: Any) -> dict[str, Any]:
    """Await ``work`` (:func:`single` or :func:`load`), adding the bank's own p50 and p99 bucket bounds of the same
    requests; under load also the bank's CPU microseconds per answered request."""
    before = await server_histogram(base)
    out = await work
    after = await server_histogram(base)
    out["server_p50_le_ms"] = server_quantile(before, after, 0.5)
    out["server_p99_le_ms"] = server_quantile(before, after, 0.99)
    if "cpu_cores" in out and out["throughput_rps"]:
        out["bank_cpu_us_per_request"] = round(out["cpu_cores"]["bank"] / out["throughput_rps"] * 1e6, 1)
    return out


async def score_all(base: str, rows: list[dict]) -> pd.DataFrame:
    out = []
    for at in range(0, len(rows), 200):
        status, body, _ = await post(base, "/v1/score:batch", {"rows": rows[at:at + 200]})
        assert status == 200, body
        out += body["results"]
    return pd.DataFrame(out)


def max_diff(served: pd.DataFrame, batch: pd.DataFrame) -> float:
    both = served.merge(batch, left_on="id", right_on="customer_id")
    assert len(both) == len(batch) and (both["model_x"].fillna("") == both["model_y"].fillna("")).all()
    return float(np.abs(both["score"] - both["probability"]).max())


def _stats(latencies: list[float]) -> dict[str, float]:
    ms = np.asarray(latencies) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "mean_ms": round(float(ms.mean()), 3), "n": len(ms)}


def run(work: Any) -> Any:
    """Run the coroutine ``work`` on uvloop when it is installed (the client's own CPU is taken from the service)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(work)
    return uvloop.run(work)


def pids(procs: dict[str, subprocess.Popen]) -> dict[str, int]:
    return {name: proc.pid for name, proc in procs.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--single", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results-serving.json"))
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"load_average": {"start": [round(v, 2) for v in os.getloadavg()]},
                              "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="vsplit-serving-") as tmp:
        root = Path(tmp)
        http, link = free_ports(2)
        prepare(root, http=http, link=link)
        batch = {"v1": train_and_predict(root, "v1", 0), "v2": train_and_predict(root, "v2", 1)}
        test = pd.read_parquet(root / "bank" / "data" / "test.parquet")
        columns = [c for c in COLUMNS["bank"] if c != "y"]
        rows = [{"id": str(r["customer_id"]), "features": {c: r[c] for c in columns}}
                for r in json.loads(test.to_json(orient="records"))]
        base = f"http://127.0.0.1:{http}"
        manage = root / "bank" / "manage.token"  # model management (the swap below) takes a token of its own
        manage.write_text(MANAGE + "\n")
        manage.chmod(0o600)
        managed = ("serve.manage=true", 'serve.manage_token_file="manage.token"')
        procs = {"partner": start(root, "partner"), "bank": start(root, "bank", *managed)}
        try:
            asyncio.run(wait_ready(base))
            live: dict[str, Any] = {"max_abs_diff_vs_batch": max_diff(asyncio.run(score_all(base, rows)), batch["v1"])}
            live["single"] = run(server_view(base, single(base, rows, args.single)))
            live["load"] = run(server_view(base, load(base, rows, seconds=args.seconds, concurrency=args.concurrency,
                                                        pids=pids(procs))))
            live["load"].pop("side")
            swap = run(load(base, rows, seconds=args.seconds / 2, concurrency=args.concurrency,
                                    during=post(base, "/v1/models", {"run_id": "v2"},
                                                {"authorization": f"Bearer {MANAGE}"})))
            status, body, ms = swap.pop("side")
            result["swap"] = {"failed_requests": swap["failed_requests"], "requests": swap["requests"],
                              "switch_status": status, "switch_ms": ms,
                              "active": [m["run_id"] for m in body["models"] if m["active"]],
                              "max_abs_diff_vs_batch_v2": max_diff(asyncio.run(score_all(base, rows)), batch["v2"])}
            procs["partner"].send_signal(signal.SIGSTOP)
            status, body, ms = asyncio.run(post(base, "/v1/score", rows[0]))
            procs["partner"].send_signal(signal.SIGCONT)
            result["partner_down"] = {"status": status, "ms": ms, "timeout_ms": 1000,
                                      "party": body.get("error", {}).get("party")}
            result["live"] = live
            procs["bank"].send_signal(signal.SIGTERM)
            result["bank_exit_code_on_sigterm"] = procs["bank"].wait(timeout=60)
            procs["bank"] = start(root, "bank", "serve.mode=cached", *managed)
            asyncio.run(wait_ready(base))
            cached: dict[str, Any] = {"max_abs_diff_vs_batch": max_diff(asyncio.run(score_all(base, rows)),
                                                                        batch["v1"])}
            cached["single"] = run(server_view(base, single(base, rows, args.single)))
            cached["load"] = run(server_view(base, load(base, rows, seconds=args.seconds,
                                                          concurrency=args.concurrency, pids=pids(procs))))
            cached["load"].pop("side")
            result["cached"] = cached
        finally:
            for proc in procs.values():
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
    result["load_average"]["end"] = [round(v, 2) for v in os.getloadavg()]
    result["settings"] = {"workers": 2, "max_batch": 256, "concurrency": args.concurrency, "seconds": args.seconds,
                          "client": "benchmarks/http_client.py: asyncio HTTP/1.1 on uvloop, one keep-alive "
                                    "connection per client, prebuilt requests, in the benchmark's process",
                          "rows_scored": len(rows), "bank_columns": columns}
    text = json.dumps(result, indent=2)
    print(text)
    from vsplit.atomic import save_with

    save_with(Path(args.out), lambda h: h.write(text.encode() + b"\n"))
    return result


if __name__ == "__main__":
    main()
