"""Many clients with the same columns: every horizontal schedule against the pooled model and the best client alone.

    python benchmarks/clients.py [--only iid/3 --only mnist1d/4] [--seeds 3] [--rounds N] [--rows N]
        [--schedules splitfed_v1,splitfed_v1/reset] [--by LIMIT_BAL]

Prints ONE JSON object keyed by entry (``iid/3``, ``iid/5``, ``non_iid/5``: default-credit rows dealt to 3 or 5
banks at random or sorted by EDUCATION; ``mnist1d/4``: MNIST-1D dealt at random to 4 clients), each with the
split's ``skew`` per seed (:meth:`HorizontalSplit.skew`) and one dict per schedule: ``sequential`` (relayed by the
server, sealed end to end), ``splitfed_v1``, ``splitfed_v2`` (batch_interleaved), ``fedavg``, ``split`` (every
training row at one client: plain vanilla split training, a sequential schedule with one client and no hand-off)
(``--schedules`` also takes ``splitfed_v1/reset``, ``fedavg/keep`` and the like: that optimizer policy whatever the
entry's recipe), and the baselines ``pooled`` (the same network in one place on every training row, on the batches
``split`` trains on, so the two differ only by the cut) and
``best_bank_alone`` (each client trains the same network on its own rows; the best on the test rows). Each
schedule dict holds

  auc / accuracy          test AUC (MNIST-1D: one-vs-rest macro AUC) and, MNIST-1D, accuracy, on the pooled test
                          rows (every client's test rows), mean over the seeds; ``*_per_seed`` the values
  bytes_per_client_epoch  encoded bytes a client sends per epoch (one pass over its rows), from the pumps' stats:
                          the run's total over the rounds, mean over the clients; ``server_bytes_per_epoch`` too
  client_flops_per_epoch  forward + backward FLOPs of the client's segment(s) over its rows per epoch (FedAvg: the
                          whole model), mean over the clients; counted with vsplit.plan's cost model
                          (:class:`vsplit.plan.measure.Meter`, the formulas of ``torch.utils.flop_counter``, 2 per
                          multiply-add) over one forward and backward pass of the client's rows: the first layer's
                          input needs no gradient, as in training; optimizer and loss FLOPs are left out
  epoch_s                 wall seconds per epoch with every party its own OS process over mutual TLS on this
                          machine (``--transport tls``, the default; train_horizontal_processes); with
                          ``--transport memory``, and for the baselines, ``epoch_s_in_process`` (one process, memory
                          channels, the real codec). The parameters, and so the AUC, are the same either way
  rounds / epochs         rounds run, and epochs (passes over each client's rows) they make
  settings                ``Settings.describe()``

and ``load_average`` (``os.getloadavg()``) at the start and the end. Models: default credit 23 standardized
columns (one scaler from the pooled train rows' mean and standard deviation, which the banks can compute with a
row-weighted average of their own; no row moves) -> client 23-32-16 (ReLU) | server 16-16-1, Adam lr 1e-3, batch
256, 40 rounds; MNIST-1D: the package's ConvBase recipe (``notebooks/models.py`` and ``train.py`` of
greydanus/mnist1d: three Conv1d layers of 25 channels, kernel 5 then 3, stride 2, ReLU, a Linear 125 -> 10; Adam
lr 1e-2, batch 100), cut after the first conv block (client: conv1 + ReLU, 475 values per row | server: the rest),
``MNIST1D_ROUNDS`` rounds, AdamW (weight decay 0.05) and ``lr_schedule="step"`` (a tenth of the rate for the last
tenth of the rounds) for every schedule and both baselines. FedAvg trains the whole network at each client. The
averaging schedules keep each client's optimizer state across averages (``optimizer_policy="keep"``) on default
credit, and start each round with a fresh optimizer (``"reset"``) on MNIST-1D, whose learning rate (1e-2) makes stale
Adam moments costly.

``run_schedule(name, settings, split, init, test, seed, runner=in_process)`` does one measured run; pass another
``runner`` (same signature as :func:`in_process`, returning a :class:`Run`) and ``timing_key`` to time the same run
with every party as an OS process.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from vsplit.datasets.horizontal import horizontal_split
from vsplit.horizontal import ClientSide, HorizontalOutcome, ServerSide, Settings, train_horizontal
from vsplit.horizontal.schedule import TRAIN, compile_schedule, lr_scale, stage_plan
from vsplit.models.tasks import make_task
from vsplit.plan.measure import Meter
from vsplit.topology import Topology
from vsplit.topology.horizontal import Horizontal

Rows = tuple[torch.Tensor, torch.Tensor]
CREDIT_ROUNDS = 40
MNIST1D_ROUNDS = 200  # the recipe's 8,000 steps of 100 rows over 4,000 training rows


@dataclass(frozen=True)
class Entry:
    """One key of the output: which rows, dealt how, to how many clients."""

    data: str
    scheme: str
    clients: int
    by: str | None = None
    #: the averaging schedules' optimizer policy in this entry's recipe (``--schedules`` variants override it)
    optimizer_policy: str = "keep"
    #: the recipe's decoupled weight decay (AdamW; 0: plain Adam) and learning-rate schedule per round
    #: (:func:`vsplit.horizontal.schedule.lr_scale`; every schedule and both baselines follow it)
    weight_decay: float = 0.0
    lr_schedule: str = "constant"


ENTRIES = {
    "iid/3": Entry("default_credit", "iid", 3),
    "iid/5": Entry("default_credit", "iid", 5),
    "non_iid/5": Entry("default_credit", "non_iid", 5, "EDUCATION"),
    # lr 1e-2: stale Adam moments cost 2-5 points (reset); weight decay and a tenth of the rate for the last tenth of
    # the rounds make the pooled CNN reach MNIST-1D's published 94 % on every seed (92.2 % without)
    "mnist1d/4": Entry("mnist1d", "iid", 4, optimizer_policy="reset", weight_decay=0.05, lr_schedule="step"),
}
#: The schedules every entry runs, as Settings keywords (``split`` runs on one client holding every row).
SCHEDULES: dict[str, dict[str, Any]] = {
    "sequential": {"kind": "sequential", "route": "server"},
    "splitfed_v1": {"kind": "splitfed_v1"},
    "splitfed_v2": {"kind": "splitfed_v2", "interleave": "batch_interleaved"},
    "fedavg": {"kind": "fedavg"},
    "split": {"kind": "sequential", "route": "direct"},
}
#: More schedules ``--schedules`` can name: the averaging schedules with each optimizer policy.
VARIANTS: dict[str, dict[str, Any]] = {
    f"{name}/{policy}": {**SCHEDULES[name], "optimizer_policy": policy}
    for name in ("splitfed_v1", "splitfed_v2", "fedavg") for policy in ("keep", "reset")
}


@dataclass
class Split:
    """One seed's rows: each client's training tensors, and the split's skew report."""

    banks: dict[str, Rows]
    skew: dict[str, dict[str, float]]
    multiclass: bool


@dataclass
class Model:
    """The initial network (``bottom`` at the clients, ``top`` at the server) and its training recipe."""

    modules: dict[str, nn.Module]
    width: int
    lr: float
    batch_size: int
    rounds: int
    weight_decay: float = 0.0
    lr_schedule: str = "constant"

    def optimizer(self, params) -> torch.optim.Optimizer:
        if self.weight_decay:
            return torch.optim.AdamW(list(params), lr=self.lr, weight_decay=self.weight_decay)
        return torch.optim.Adam(list(params), lr=self.lr)

    def lr_at(self, epoch: int) -> float:
        """The learning rate of ``epoch`` (a round) as a fraction of ``lr``."""
        return lr_scale(Settings(rounds=self.rounds, lr_schedule=self.lr_schedule), epoch)


@dataclass
class Run:
    """What a runner returns: every party's outcome, the encoded bytes each party sent, the wall seconds."""

    outcomes: Mapping[str, HorizontalOutcome]
    sent: Mapping[str, int]
    seconds: float


Runner = Callable[[Horizontal, Settings, Mapping[str, ClientSide], "ServerSide | None"], Run]


def in_process(h: Horizontal, settings: Settings, clients: Mapping[str, ClientSide], server: ServerSide | None) -> Run:
    """Every party in this process over memory channels and the real codec; bytes from the pumps' stats."""
    pumps: dict = {}
    began = time.perf_counter()
    out = train_horizontal(h, settings, clients, server, pumps=pumps)
    seconds = time.perf_counter() - began
    sent = {p: sum(stage[p].stats.total("sent") for stage in pumps.values() if p in stage) for p in h.parties}
    return Run(out, sent, seconds)


# -- data and models ---------------------------------------------------------------------------------------------


def load_split(entry: Entry, seed: int, *, max_rows: int | None = None) -> tuple[Split, Rows]:
    """The clients' training tensors and the pooled test tensors of ``entry`` for ``seed``."""
    s = horizontal_split(entry.data, clients=entry.clients, scheme=entry.scheme, by=entry.by, seed=seed)
    features = list(s.features)

    def matrix(table: pd.DataFrame) -> np.ndarray:
        return table[features].apply(pd.to_numeric).to_numpy(np.float64)  # credit's code strings -> their codes

    train = matrix(s.pooled("train"))
    mean, std = (train.mean(0), train.std(0) + 1e-9) if entry.data == "default_credit" else (0.0, 1.0)
    multiclass = s.positive_label is None

    def tensors(table: pd.DataFrame) -> Rows:
        x = torch.from_numpy(((matrix(table) - mean) / std).astype(np.float32))
        y = table[s.label].to_numpy()
        return x, torch.from_numpy(y.astype(np.int64) if multiclass else (y == s.positive_label).astype(np.float32))

    banks = {c: tensors(s.train[c].iloc[:max_rows]) for c in s.clients}
    skew = {c: {k: int(v) if k.endswith("rows") else round(float(v), 4) for k, v in row.items()}
            for c, row in s.skew().iterrows()}
    return Split(banks, skew, multiclass), tensors(s.pooled("test"))


def make_model(entry: Entry, seed: int, *, rounds: int | None = None) -> Model:
    """The entry's initial network for ``seed`` (see the module docstring)."""
    torch.manual_seed(seed)
    if entry.data == "mnist1d":  # ConvBase(channels=25, linear_in=125), built in its order, cut after conv1
        bottom = nn.Sequential(nn.Unflatten(1, (1, 40)), nn.Conv1d(1, 25, 5, stride=2, padding=1), nn.ReLU(),
                               nn.Flatten())
        top = nn.Sequential(nn.Unflatten(1, (25, 19)), nn.Conv1d(25, 25, 3, stride=2, padding=1), nn.ReLU(),
                            nn.Conv1d(25, 25, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(125, 10))
        return Model({"bottom": bottom, "top": top}, 25 * 19, 1e-2, 100, rounds or MNIST1D_ROUNDS,
                     weight_decay=entry.weight_decay, lr_schedule=entry.lr_schedule)
    return Model(credit_network(hidden=32, depth=1, seed=seed), 16, 1e-3, 256, rounds or CREDIT_ROUNDS)


def credit_network(
    *, hidden: int, depth: int, seed: int, width: int = 16, top: Sequence[int] = (16,)
) -> dict[str, nn.Module]:
    """Default credit: client 23 -> hidden (``depth`` times) -> width, ReLU after each | server width -> top... -> 1."""
    torch.manual_seed(seed)
    return {"bottom": mlp([23, *[hidden] * depth, width], last_relu=True), "top": mlp([width, *top, 1])}


def mlp(sizes: Sequence[int], *, last_relu: bool = False) -> nn.Sequential:
    """Linear layers of ``sizes`` with a ReLU between them (and after the last with ``last_relu``)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


# -- measuring ---------------------------------------------------------------------------------------------------


def train_flops(modules: Sequence[nn.Module], x: torch.Tensor) -> int:
    """Forward + backward FLOPs of ``modules`` chained on the rows ``x`` (vsplit.plan's counter)."""
    model = nn.Sequential(*copy.deepcopy(list(modules)))
    meter = Meter(skip=set())
    with meter.counting():
        model(x).sum().backward()
    return int(sum(meter.flops.values()))


def score(modules: Mapping[str, nn.Module], test: Rows, multiclass: bool) -> dict[str, float]:
    """Test AUC (multiclass: one-vs-rest macro) and, multiclass, accuracy."""
    x, y = test
    model = nn.Sequential(modules["bottom"], modules["top"]).eval()
    with torch.no_grad():
        out = model(x)
    if not multiclass:
        return {"auc": float(roc_auc_score(y.numpy(), out.squeeze(-1).numpy()))}
    proba = torch.softmax(out, dim=1).double().numpy()
    return {"auc": float(roc_auc_score(y.numpy(), proba, multi_class="ovr")),
            "accuracy": float((out.argmax(1) == y).double().mean())}


def run_schedule(
    name: str,
    settings: Settings,
    split: Split,
    init: Model,
    test: Rows,
    seed: int,
    *,
    runner: Runner = in_process,
    timing_key: str = "epoch_s_in_process",
) -> dict[str, Any]:
    """One measured run of ``settings`` over ``split``'s clients from the initial network ``init``.

    ``name`` only labels the result; ``seed`` seeds torch before the run (the batches derive from
    ``settings.seed``). Returns the metrics, bytes, FLOPs and seconds the module docstring lists.
    """
    torch.manual_seed(seed)
    banks = split.banks
    task = make_task("multiclass" if split.multiclass else "binary")
    h = Horizontal(Topology.vanilla(client="client", server="server", width=init.width), client="client",
                   clients=list(banks))
    whole = settings.kind == "fedavg"
    own = ("bottom", "top") if whole else ("bottom",)
    clients = {c: ClientSide({s: copy.deepcopy(init.modules[s]) for s in own}, {"bottom": (x,)}, init.optimizer,
                             labels=y if whole else None, task=task) for c, (x, y) in banks.items()}
    server = None if whole else ServerSide({"top": copy.deepcopy(init.modules["top"])}, init.optimizer,
                                           labels={c: y for c, (_, y) in banks.items()}, task=task)
    run = runner(h, settings, clients, server)
    last = list(banks)[-1]  # after the last average every client holds the same weights; sequential: the last turn
    out = run.outcomes
    modules = out[last].modules if whole else {**out[last].modules, **out["server"].modules}
    flops = [train_flops([init.modules[s] for s in own], x) for x, _ in banks.values()]
    return {
        "name": name,
        **{k: round(v, 4) for k, v in score(modules, test, split.multiclass).items()},
        "bytes_per_client_epoch": int(np.mean([run.sent[c] for c in banks]) / settings.rounds),
        "server_bytes_per_epoch": int(run.sent["server"] / settings.rounds),
        "client_flops_per_epoch": int(np.mean(flops)),
        timing_key: round(run.seconds / settings.rounds, 4),
        "rounds": settings.rounds,
        "epochs": settings.rounds,
        "settings": settings.describe(),
    }


def split_batches(n_rows: int, init: Model, seed: int) -> list[list[np.ndarray]]:
    """The batches, epoch by epoch, that the ``split`` schedule (one client, every row) trains ``n_rows`` rows on."""
    settings = settings_for("split", rounds=init.rounds, batch_size=init.batch_size, seed=seed)
    stages = compile_schedule(settings, clients=["pooled"], server="server", rows={"pooled": n_rows})
    return [stage_plan(settings, s, "pooled", n_rows).batches(0) for s in stages if s.kind == TRAIN]


def plain(rows: Rows, init: Model, seed: int, multiclass: bool,
          batches: list[list[np.ndarray]] | None = None) -> tuple[dict[str, nn.Module], float]:
    """The same network trained in one place on ``rows`` (plain PyTorch) for ``init.rounds`` epochs; seconds.
    ``batches``: each epoch's batches (default: a seeded ``torch.randperm`` per epoch)."""
    modules = copy.deepcopy(init.modules)
    model = nn.Sequential(modules["bottom"], modules["top"]).train()
    opt = init.optimizer(model.parameters())
    loss = make_task("multiclass" if multiclass else "binary").loss
    x, y = rows
    g = torch.Generator().manual_seed(seed)
    began = time.perf_counter()
    for epoch in range(init.rounds):
        for group in opt.param_groups:
            group["lr"] = init.lr * init.lr_at(epoch)
        order = (torch.randperm(len(x), generator=g).split(init.batch_size) if batches is None
                 else [torch.as_tensor(b, dtype=torch.long) for b in batches[epoch]])
        for idx in order:
            opt.zero_grad()
            loss(model(x[idx]), y[idx]).backward()
            opt.step()
    return modules, time.perf_counter() - began


def baselines(split: Split, init: Model, test: Rows, seed: int) -> dict[str, dict[str, Any]]:
    """``pooled`` (on the ``split`` schedule's batches, so that the two differ only by the cut) and
    ``best_bank_alone`` for one seed."""
    whole = [init.modules["bottom"], init.modules["top"]]

    def one(rows: Rows, batches: list[list[np.ndarray]] | None = None) -> dict[str, Any]:
        modules, seconds = plain(rows, init, seed, split.multiclass, batches)
        order = "the split's batches" if batches is not None else "seeded batches"
        return {**{k: round(v, 4) for k, v in score(modules, test, split.multiclass).items()},
                "bytes_per_client_epoch": None, "client_flops_per_epoch": train_flops(whole, rows[0]),
                "epoch_s_in_process": round(seconds / init.rounds, 4), "rounds": init.rounds, "epochs": init.rounds,
                "settings": f"plain PyTorch, {'AdamW' if init.weight_decay else 'Adam'} lr {init.lr}"
                            f"{f' weight decay {init.weight_decay:g}' if init.weight_decay else ''}, lr schedule "
                            f"{init.lr_schedule}, batch {init.batch_size}, {order}"}

    banks = split.banks
    rows = (torch.cat([x for x, _ in banks.values()]), torch.cat([y for _, y in banks.values()]))
    pooled = one(rows, split_batches(len(rows[0]), init, seed))
    alone = {c: one(rows) for c, rows in banks.items()}
    best = max(alone, key=lambda c: alone[c].get("accuracy", alone[c]["auc"]))
    return {"pooled": pooled, "best_bank_alone": {**alone[best], "bank": best, "bytes_per_client_epoch": 0}}


def settings_for(name: str, *, rounds: int, batch_size: int, seed: int, secure: str = "auto",
                 policy: str = "keep", lr_schedule: str = "constant") -> Settings:
    """The Settings of schedule ``name``; ``secure``: its secure aggregation (``auto``: what a user gets);
    ``policy``: the optimizer policy unless ``name`` is a variant that sets one; ``lr_schedule``: the recipe's."""
    return Settings(**{"optimizer_policy": policy, **{**SCHEDULES, **VARIANTS}[name]}, rounds=rounds,
                    batch_size=batch_size, seed=seed, secure_aggregation=secure, lr_schedule=lr_schedule)


def over_tls(h: Horizontal, settings: Settings, clients: Mapping[str, ClientSide], server: ServerSide | None) -> Run:
    """Every party as its own OS process over mutual TLS on this machine (train_horizontal_processes); the
    outcomes equal the in-process run's bit for bit, the bytes are the frames each process sent."""
    from vsplit.horizontal.run import train_horizontal_processes

    out, sent, seconds = train_horizontal_processes(h, settings, clients, server)
    return Run(out, sent, seconds)


#: how the schedules run: the runner and the key its seconds per epoch go under
TRANSPORTS = {"tls": (over_tls, "epoch_s"), "memory": (in_process, "epoch_s_in_process")}


def mean_over_seeds(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One schedule's runs over the seeds: metrics, bytes, FLOPs and seconds averaged; per-seed metrics kept."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        values = [r[key] for r in runs]
        if key in ("auc", "accuracy"):
            out[key] = round(float(np.mean(values)), 4)
            out[f"{key}_per_seed"] = values
        elif key.startswith(("epoch_s", "bytes", "server_bytes", "client_flops")) and value is not None:
            out[key] = round(float(np.mean(values)), 4) if key.startswith("epoch_s") else int(np.mean(values))
        elif key in ("bank",):
            out["bank_per_seed"] = values
        elif key != "name":
            out[key] = value
    return out


def run_entry(key: str, *, seeds: Sequence[int], rounds: int | None, max_rows: int | None,
              schedules: Sequence[str] = tuple(SCHEDULES), transport: str = "memory",
              secure: str = "auto") -> dict[str, Any]:
    """Every schedule and both baselines of one entry, over ``seeds`` (``transport``: see :data:`TRANSPORTS`)."""
    runner, timing_key = TRANSPORTS[transport]
    entry = ENTRIES[key]
    runs: dict[str, list[dict[str, Any]]] = {}
    skews = {}
    for seed in seeds:
        split, test = load_split(entry, seed, max_rows=max_rows)
        init = make_model(entry, seed, rounds=rounds)
        skews[str(seed)] = split.skew
        for name in schedules:
            data = split
            if name == "split":  # every training row at one client
                data = Split({"pooled": (torch.cat([x for x, _ in split.banks.values()]),
                                         torch.cat([y for _, y in split.banks.values()]))}, {}, split.multiclass)
            settings = settings_for(name, rounds=init.rounds, batch_size=init.batch_size, seed=seed, secure=secure,
                                    policy=entry.optimizer_policy, lr_schedule=entry.lr_schedule)
            result = run_schedule(name, settings, data, init, test, seed, runner=runner, timing_key=timing_key)
            if name == "split":
                result["settings"] = (f"vanilla split, every training row at one client ({result['settings']}: "
                                      "no hand-off)")
            runs.setdefault(name, []).append(result)
        for name, result in baselines(split, init, test, seed).items():
            runs.setdefault(name, []).append(result)
    return {"data": entry.data, "scheme": entry.scheme, "by": entry.by or "", "clients": entry.clients,
            "seeds": list(seeds), "skew": skews, **{name: mean_over_seeds(r) for name, r in runs.items()}}


def warm_up() -> None:
    """One tiny run of every schedule, discarded: the first run in a process pays for lazy imports."""
    split, test = load_split(ENTRIES["iid/3"], 0, max_rows=64)
    init = make_model(ENTRIES["iid/3"], 0, rounds=1)
    for name in SCHEDULES:
        run_schedule(name, settings_for(name, rounds=1, batch_size=32, seed=0), split, init, test, 0)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", choices=list(ENTRIES), help="run only this entry (repeatable)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--rounds", type=int, default=None, help=f"rounds (default {CREDIT_ROUNDS}; MNIST-1D "
                        f"{MNIST1D_ROUNDS})")
    parser.add_argument("--schedules", default=",".join(SCHEDULES),
                        help=f"comma-separated, from {', '.join([*SCHEDULES, *VARIANTS])} (default: the first five)")
    parser.add_argument("--by", default=None, help="the column non-IID entries sort by (default EDUCATION)")
    parser.add_argument("--rows", type=int, default=None, help="keep at most this many training rows per client")
    parser.add_argument("--transport", choices=list(TRANSPORTS), default="tls",
                        help="tls (default): every party its own process over mutual TLS, seconds as epoch_s; "
                             "memory: all in this process, seconds as epoch_s_in_process")
    parser.add_argument("--secure-aggregation", choices=["auto", "on", "off"], default="auto",
                        help="the schedules' secure aggregation (default auto: on for SplitFed and FedAvg with 3 or "
                             "more clients, as users get it)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.schedules.split(",")) - {*SCHEDULES, *VARIANTS})
    if unknown:
        parser.error(f"unknown schedules {unknown}; choose from {', '.join([*SCHEDULES, *VARIANTS])}")
    torch.set_num_threads(1)
    result: dict[str, Any] = {"load_average": {"start": [round(v, 2) for v in os.getloadavg()]},
                              "transport": args.transport, "secure_aggregation": args.secure_aggregation}
    began = time.perf_counter()
    warm_up()
    for key in args.only or list(ENTRIES):
        if args.by and ENTRIES[key].scheme == "non_iid":
            ENTRIES[key] = dataclasses.replace(ENTRIES[key], by=args.by)
        result[key] = run_entry(key, seeds=range(args.seeds), rounds=args.rounds, max_rows=args.rows,
                                schedules=args.schedules.split(","), transport=args.transport,
                                secure=args.secure_aggregation)
    result["load_average"]["end"] = [round(v, 2) for v in os.getloadavg()]
    result["seconds"] = round(time.perf_counter() - began, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
