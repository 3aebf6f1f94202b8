"""Bytes a client sends per epoch against the size of its model: split learning (SplitFed v1, sequential) and FedAvg.

    python benchmarks/traffic.py [--out benchmarks/results-traffic.json] [--figure docs/img/traffic_vs_model_size.png]

Default credit, 3 banks (IID, 8,000 training rows each), the cut 16 values wide, 1 round each (one pass over every
bank's rows). The client segment is 23 -> hidden (``depth`` times) -> 16 for the five ``SIZES``; the server segment
is either the benchmark's small top (16 -> 16 -> 1, 289 parameters) or a large one (16 -> 512 -> 512 -> 1, 271,873
parameters). Bytes are the encoded bytes each client sent, from the pumps' stats (mean over the clients), run by
:func:`clients.run_schedule` (every party in one process over the real codec):

- ``splitfed_v1``: the cut activations of every row (the labels stay at the server) plus, once per round, the
  client segment's weights to the federated server;
- ``sequential`` (relayed by the server, sealed): the activations plus the hand-off (weights and both Adam
  moments, three copies of the client segment) to the next bank; with 1 round the last bank hands nothing on, so
  the mean over the banks counts 2 hand-offs in 3 (a run of R rounds: 3R - 1 in 3R);
- ``fedavg``: the whole model's weights once per round, nothing per row.

``crossings`` gives, for each split schedule against FedAvg with the same server segment, the client-segment
parameter counts between which the measured lines cross (interpolated in log-log), or none in the measured range.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clients import ENTRIES, Model, credit_network, load_split, run_schedule, settings_for

#: Client segments (hidden width, hidden layers), for the client sweep.
SIZES = ((8, 1), (32, 1), (128, 2), (512, 2), (1024, 3))
#: Server segments (hidden widths between the cut and the output) the client sweep runs with.
TOPS = {"small_top": (16,), "large_top": (512, 512)}
#: Server segments of the server sweep (client segment 23 -> 32 -> 16).
SERVER_SIZES = ((16,), (64,), (128, 128), (256, 256), (512, 512))
SCHEDULES = ("splitfed_v1", "sequential", "fedavg")


def params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def point(split, test, *, hidden: int, depth: int, top: tuple[int, ...], rounds: int) -> dict[str, Any]:
    """One network: its sizes, and each schedule's bytes per client per epoch (and FLOPs, AUC)."""
    modules = credit_network(hidden=hidden, depth=depth, seed=0, top=top)
    init = Model(modules, 16, 1e-3, 256, rounds)
    out: dict[str, Any] = {"client": [23, *[hidden] * depth, 16], "server": [16, *top, 1],
                           "client_params": params(modules["bottom"]), "server_params": params(modules["top"])}
    for name in SCHEDULES:
        run = run_schedule(name, settings_for(name, rounds=rounds, batch_size=256, seed=0), split, init, test, 0)
        out[name] = {k: run[k] for k in ("bytes_per_client_epoch", "client_flops_per_epoch", "auc")}
    return out


def sweep(points: list[dict[str, Any]], x: str) -> dict[str, Any]:
    return {"x": x, "points": points, "crossings": {s: crossing(points, s, x) for s in SCHEDULES if s != "fedavg"}}


def measure(*, rounds: int = 1, max_rows: int | None = None) -> dict[str, Any]:
    """The client sweep (at both server segments) and the server sweep."""
    split, test = load_split(ENTRIES["iid/3"], 0, max_rows=max_rows)
    out: dict[str, Any] = {}
    for top_name, top in TOPS.items():
        points = [point(split, test, hidden=h, depth=d, top=top, rounds=rounds) for h, d in SIZES]
        out[f"client_sweep/{top_name}"] = sweep(points, "client_params")
    points = [point(split, test, hidden=32, depth=1, top=top, rounds=rounds) for top in SERVER_SIZES]
    out["server_sweep"] = sweep(points, "server_params")
    return out


def crossing(points: list[dict[str, Any]], schedule: str, x: str) -> dict[str, Any] | None:
    """Where ``schedule``'s bytes cross FedAvg's along ``x``, interpolated linearly in log-log between points."""

    def gap(p: dict[str, Any]) -> float:
        return math.log(p[schedule]["bytes_per_client_epoch"]) - math.log(p["fedavg"]["bytes_per_client_epoch"])

    for a, b in itertools.pairwise(points):
        if gap(a) == 0 or gap(a) * gap(b) < 0:
            t = gap(a) / (gap(a) - gap(b))
            xa, xb = math.log(a[x]), math.log(b[x])
            ya, yb = (math.log(p["fedavg"]["bytes_per_client_epoch"]) for p in (a, b))
            at, height = math.exp(xa + t * (xb - xa)), math.exp(ya + t * (yb - ya))
            return {x: round(at), "bytes_per_client_epoch": round(height),
                    "cheaper_below": schedule if gap(a) < 0 else "fedavg"}
    return None


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    colors = {"splitfed_v1": "tab:blue", "sequential": "tab:green", "fedavg": "tab:red"}
    panels = [(left, "client_sweep/small_top", "-", "server 16-16-1"),
              (left, "client_sweep/large_top", "--", "server 16-512-512-1"),
              (right, "server_sweep", "-", "client 23-32-16")]
    for ax, key, style, fixed in panels:
        block = result["sweeps"][key]
        xs = [p[block["x"]] for p in block["points"]]
        for s in SCHEDULES:
            ax.plot(xs, [p[s]["bytes_per_client_epoch"] for p in block["points"]], style, marker="o", ms=4,
                    color=colors[s], label=f"{s}, {fixed}")
        for i, (s, cross) in enumerate(block["crossings"].items()):
            if cross:
                ax.plot(cross[block["x"]], cross["bytes_per_client_epoch"], "kx", ms=10, mew=2)
                where = (cross[block["x"]], cross["bytes_per_client_epoch"])
                ax.annotate(f"{s} = fedavg\n~{cross[block['x']]:,} params", where, textcoords="offset points",
                            xytext=(8, -26 if i == 0 else 10), fontsize=8)
    for ax, label in ((left, "client segment parameters"), (right, "server segment parameters")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(label + " (FedAvg's client trains both segments)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    left.set_ylabel("bytes a client sends per epoch")
    fig.suptitle(f"Default credit, 3 banks x {result['rows_per_bank']:,} rows, cut width 16, measured over "
                 f"{result['rounds']} round", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--figure", type=Path, default=None, help="write the log-log plot here")
    parser.add_argument("--rows", type=int, default=None, help="keep at most this many training rows per bank")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result: dict[str, Any] = {"load_average": {"start": [round(v, 2) for v in os.getloadavg()]},
                              "banks": 3, "cut_width": 16, "rounds": 1}
    result["rows_per_bank"] = args.rows or 8000
    result["sweeps"] = measure(max_rows=args.rows)
    result["load_average"]["end"] = [round(v, 2) for v in os.getloadavg()]
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.figure:
        plot(result, args.figure)


if __name__ == "__main__":
    main()
