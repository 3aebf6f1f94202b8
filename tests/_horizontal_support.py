"""Builders shared by the horizontal tests: a small model with BatchNorm cut anywhere, three clients' rows, a run."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from torch import nn

from vsplit.horizontal import ClientSide, ServerSide
from vsplit.horizontal.run import train_horizontal
from vsplit.models.tasks import make_task
from vsplit.topology import Horizontal, Topology

ROWS = {"a": 40, "b": 26, "c": 34}  # last batches of 2: BatchNorm needs two rows
WIDTHS = (8, 8, 6, 1)  # each block's output width
BATCH, ROUNDS = 8, 2
LOSS = make_task("binary").loss


def hand_secrets(configs: dict[str, Path], *, seed: int = 0) -> None:
    """Give every party of a prepared horizontal run (:func:`vsplit.pilot.horizontal.prepare_horizontal`) the init
    seed ``seed`` and every client the clients' shared seed ``seed``, as restoring a backup would: two folders
    prepared apart (processes, and their in-process reference) then start from the same weights."""
    import tomllib

    from tests._pilot_support import hand_secrets as hand_own
    from vsplit.horizontal.shared_seed import FILE
    from vsplit.models.secret import write_secret

    hand_own(configs, seed=seed)
    for path in configs.values():
        raw = tomllib.loads(path.read_text())
        if raw["party"]["name"] in raw["topology"]["clients"]:
            shared = (path.parent / raw["network"]["key"]).parent / FILE
            shared.unlink(missing_ok=True)
            write_secret(shared, seed)


def blocks() -> list[nn.Module]:
    torch.manual_seed(0)
    return [
        nn.Sequential(nn.BatchNorm1d(3), nn.Linear(3, 8), nn.ReLU()),  # BatchNorm on the inputs: a trained bias
        # feeding BatchNorm gets only rounding noise as its gradient (BatchNorm removes the mean), which Adam scales up
        # to full steps: no two runs in different orders of summation would agree on it
        nn.Sequential(nn.Linear(8, 8), nn.ReLU()),
        nn.Sequential(nn.Linear(8, 6), nn.ReLU()),
        nn.Linear(6, 1),
    ]


def segments(kind: str, cuts: tuple[int, ...]) -> dict[str, nn.Module]:
    """The test model cut after the blocks in ``cuts``: vanilla bottom/top, U-shaped head/middle/tail."""
    b = blocks()
    names = ("bottom", "top") if kind == "vanilla" else ("head", "middle", "tail")
    edges = (0, *cuts, len(b))
    return {n: nn.Sequential(*b[lo:hi]) for n, lo, hi in zip(names, edges, edges[1:], strict=False)}


def horizontal(kind: str, cuts: tuple[int, ...], clients=tuple(ROWS)):
    if kind == "vanilla":
        base = Topology.vanilla(client="client", server="server", width=WIDTHS[cuts[0] - 1])
    else:
        base = Topology.u_shaped(client="client", server="server", widths=(WIDTHS[cuts[0] - 1], WIDTHS[cuts[1] - 1]))
    return Horizontal(base, client="client", clients=list(clients))


def data(rows=ROWS):
    out = {}
    for i, (c, n) in enumerate(rows.items()):
        g = torch.Generator().manual_seed(10 + i)
        out[c] = (torch.randn(n, 3, generator=g), (torch.rand(n, generator=g) < 0.4).float())
    return out


def optimizer(kind: str):
    if kind == "sgd":
        return lambda params: torch.optim.SGD(list(params), lr=0.05, momentum=0.9)
    return lambda params: torch.optim.Adam(list(params), lr=0.01)


def run(h, settings, init, xy, opt, *, whole=False, taps=()):
    """Train with the schedule; ``whole``: every client holds every segment and its labels (FedAvg)."""
    own = [s for s in init if whole or s in h.client_segments]
    labels_at_client = whole or not h.labels_at_server
    source = "bottom" if h.kind == "vanilla" else "head"
    clients = {
        c: ClientSide({s: copy.deepcopy(init[s]) for s in own}, {source: (x,)}, opt,
                      labels=y if labels_at_client else None)
        for c, (x, y) in xy.items()
    }
    server = None if whole else ServerSide(
        {s: copy.deepcopy(init[s]) for s in h.server_segments}, opt,
        labels={c: y for c, (_, y) in xy.items()} if h.labels_at_server else None)
    return train_horizontal(h, settings, clients, server, taps=taps)


