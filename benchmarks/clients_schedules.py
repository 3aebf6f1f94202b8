"""Many banks with the same columns: every horizontal schedule on default-credit rows split at random (IID).

Prints one JSON object keyed by schedule (``sequential``, ``splitfed_v1``, ``splitfed_v2/client_major``,
``splitfed_v2/batch_interleaved``, ``fedavg``, and the baselines ``pooled`` and ``best_bank_alone``), each with
  auc                     test AUC on the pooled test rows (20 % of the 30,000, held out before the split)
  bytes_per_client_round  encoded bytes each client sent per round (mean over clients; a round = every client one
                          pass over its rows), and ``server_bytes_per_round``
  round_s                 seconds per round, every party in this one process (memory channels, real codec)
Model: 23 standardized columns -> client segment 23-32-16 (ReLU) | server segment 16-16-1; Adam lr 1e-3,
batch 256; vanilla split (labels at the server). ``pooled`` trains the same network on all training rows for as
many epochs as there are rounds; ``best_bank_alone`` the best of the banks each on its own rows.
This is the in-process half of the issue's ``benchmarks/clients.py`` (no non-IID split, no TLS timing yet).

Run: .venv/bin/python benchmarks/clients_schedules.py [--banks 3] [--rounds 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from vsplit.datasets.loaders import load
from vsplit.horizontal import ClientSide, ServerSide, Settings, train_horizontal
from vsplit.models.tasks import make_task
from vsplit.topology import Topology

LOSS = make_task("binary").loss


def split_rows(banks: int, seed: int):
    df = load("default_credit")
    y = df.pop("default").to_numpy(np.float32)
    x = df.drop(columns=["ID"]).to_numpy(np.float64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    test, train = order[: len(x) // 5], order[len(x) // 5 :]
    mean, std = x[train].mean(0), x[train].std(0) + 1e-9  # one scaler for all: a simplification
    x = ((x - mean) / std).astype(np.float32)
    parts = np.array_split(train, banks)
    tensors = lambda rows: (torch.from_numpy(x[rows]), torch.from_numpy(y[rows]))  # noqa: E731
    return {f"bank{i + 1}": tensors(p) for i, p in enumerate(parts)}, tensors(test)


def network(seed: int) -> dict[str, nn.Module]:
    torch.manual_seed(seed)
    return {"bottom": nn.Sequential(nn.Linear(23, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU()),
            "top": nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))}


def adam(params):
    return torch.optim.Adam(list(params), lr=1e-3)


def auc(modules: dict[str, nn.Module], test) -> float:
    x, y = test
    model = nn.Sequential(modules["bottom"], modules["top"]).eval()
    with torch.no_grad():
        return float(roc_auc_score(y.numpy(), model(x).squeeze(-1).numpy()))


def plain(rows, init, epochs: int, seed: int, batch: int) -> dict[str, nn.Module]:
    """The same network trained in one place on ``rows`` (plain PyTorch)."""
    modules = copy.deepcopy(init)
    model = nn.Sequential(modules["bottom"], modules["top"]).train()
    opt = adam(model.parameters())
    x, y = rows
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=g).split(batch):
            opt.zero_grad()
            LOSS(model(x[idx]), y[idx]).backward()
            opt.step()
    return modules


def run_schedule(settings: Settings, banks, init, test) -> dict[str, float]:
    h = Topology.vanilla(client="client", server="server", width=16).replicated("client", clients=list(banks))
    whole = settings.kind == "fedavg"
    own = ("bottom", "top") if whole else ("bottom",)
    clients = {c: ClientSide({s: copy.deepcopy(init[s]) for s in own}, {"bottom": (x,)}, adam,
                             labels=y if whole else None) for c, (x, y) in banks.items()}
    server = None if whole else ServerSide({"top": copy.deepcopy(init["top"])}, adam,
                                           labels={c: y for c, (_, y) in banks.items()})
    pumps: dict = {}
    began = time.perf_counter()
    out = train_horizontal(h, settings, clients, server, pumps=pumps)
    seconds = time.perf_counter() - began
    sent = {p: sum(stage[p].stats.total("sent") for stage in pumps.values() if p in stage) for p in h.parties}
    last = list(banks)[-1]
    modules = out[last].modules if whole else {**out[last].modules, **out["server"].modules}
    return {"auc": round(auc(modules, test), 4),
            "bytes_per_client_round": int(np.mean([sent[c] for c in banks]) / settings.rounds),
            "server_bytes_per_round": int(sent["server"] / settings.rounds),
            "round_s": round(seconds / settings.rounds, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--banks", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(1)
    banks, test = split_rows(args.banks, args.seed)
    init = network(args.seed)
    common = {"rounds": args.rounds, "batch_size": args.batch, "seed": args.seed}
    schedules = {
        "sequential": Settings(kind="sequential", route="server", **common),
        "splitfed_v1": Settings(kind="splitfed_v1", **common),
        "splitfed_v2/client_major": Settings(kind="splitfed_v2", interleave="client_major", **common),
        "splitfed_v2/batch_interleaved": Settings(kind="splitfed_v2", interleave="batch_interleaved", **common),
        "fedavg": Settings(kind="fedavg", **common),
    }
    result: dict[str, object] = {"banks": args.banks, "rows_per_bank": [len(y) for _, y in banks.values()],
                                 "rounds": args.rounds}
    for name, settings in schedules.items():
        result[name] = {"settings": settings.describe(), **run_schedule(settings, banks, init, test)}
    pooled = (torch.cat([x for x, _ in banks.values()]), torch.cat([y for _, y in banks.values()]))
    result["pooled"] = {"auc": round(auc(plain(pooled, init, args.rounds, args.seed, args.batch), test), 4)}
    alone = {c: auc(plain(rows, init, args.rounds, args.seed, args.batch), test) for c, rows in banks.items()}
    best = max(alone, key=alone.__getitem__)
    result["best_bank_alone"] = {"auc": round(alone[best], 4), "bank": best}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
