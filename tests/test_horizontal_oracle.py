"""The oracles of many clients with the same columns: every schedule equals plain PyTorch doing the same thing.

- sequential with a full hand-off == one model trained centrally over the clients' batches in the same order
  (vanilla and U-shaped, Adam and SGD, direct and relayed); a hand-off of weights alone does not, with Adam;
- SplitFed v1 == FedAvg of the whole model, at every cut of the test model, for each optimizer policy;
- SplitFed v1 and v2 with one client == vanilla split training on the ordinary engine;
- SplitFed v2 with several clients == a single-process reference of the same server order, in each order.

All parties run in this process over memory channels and the real codec. The test model has a BatchNorm layer,
so buffers are handed on and averaged too.
"""

from __future__ import annotations

import copy

import pytest
import torch
from _horizontal_support import BATCH, LOSS, ROUNDS, ROWS, data, horizontal, optimizer, run, segments
from torch import nn

from vsplit.horizontal import Settings, compile_schedule, server_order, stage_plan
from vsplit.horizontal.schedule import TRAIN, lr_scale
from vsplit.models.rng import PartyRng
from vsplit.protocol.training import SplitMachine
from vsplit.runtime.inprocess import connect, run_machines


def params(modules) -> list[torch.Tensor]:
    """Every parameter and buffer of ``modules`` (segment name -> module), in a fixed order."""
    return [t for m in modules.values() for t in m.state_dict().values()]


def close(a, b, *, atol=1e-6) -> bool:
    return all(x.shape == y.shape and torch.allclose(x.double(), y.double(), atol=atol) for x, y in zip(a, b,
                                                                                                    strict=True))


def centralized(h, settings, init, xy, opt):
    """Plain PyTorch: one model, one optimizer, the sequential turns' batches in the schedule's order; the model's
    segments by name."""
    model = nn.Sequential(*(copy.deepcopy(m) for m in init.values())).train()
    optim = opt(model.parameters())
    base = [g["lr"] for g in optim.param_groups]
    for stage in compile_schedule(settings, clients=h.clients, server=h.server, rows=ROWS):
        if stage.kind != TRAIN:
            continue
        for group, lr in zip(optim.param_groups, base, strict=True):  # the schedule's rate for this round
            group["lr"] = lr * lr_scale(settings, stage.round)
        c = stage.clients[0]
        x, y = xy[c]
        for rows in stage_plan(settings, stage, c, ROWS[c]).batches(0):
            rows = torch.from_numpy(rows)
            loss = LOSS(model(x[rows]), y[rows])
            optim.zero_grad()
            loss.backward()
            optim.step()
    return dict(zip(init, model, strict=True))


SEQUENTIAL = [  # kind, cuts, optimizer, route, order, learning-rate schedule
    ("vanilla", (2,), "adam", "direct", "fixed", "constant"),
    ("vanilla", (1,), "sgd", "server", "random", "constant"),
    ("u_shaped", (1, 3), "adam", "server", "random_no_repeat", "constant"),
    ("u_shaped", (2, 3), "sgd", "direct", "fixed", "constant"),
    ("vanilla", (2,), "adam", "server", "fixed", "step"),
    ("u_shaped", (1, 3), "sgd", "direct", "random", "cosine"),
]


@pytest.mark.parametrize(("kind", "cuts", "opt", "route", "order", "lr"), SEQUENTIAL)
def test_sequential_with_handoff_equals_centralized_training(kind, cuts, opt, route, order, lr):
    h, init, xy = horizontal(kind, cuts), segments(kind, cuts), data()
    settings = Settings(kind="sequential", rounds=ROUNDS, batch_size=BATCH, order=order, route=route, seed=3,
                        lr_schedule=lr, lr_step_at=0.5, lr_factor=0.1)
    stages = compile_schedule(settings, clients=h.clients, server=h.server, rows=ROWS)
    assert sum(s.kind == "handoff" for s in stages) >= 2
    out = run(h, settings, init, xy, optimizer(opt))
    reference = centralized(h, settings, init, xy, optimizer(opt))
    last = [s for s in stages if s.kind == TRAIN][-1].clients[0]
    split = {**out[last].modules, **out[h.server].modules}
    assert close(params({n: split[n] for n in init}), params(reference))
    assert not close(params(init), params(reference), atol=1e-3), "the model did not train"


def test_sequential_handoff_of_weights_alone_does_not_equal_centralized_adam():
    h, init, xy = horizontal("vanilla", (2,)), segments("vanilla", (2,)), data()
    full = Settings(kind="sequential", rounds=ROUNDS, batch_size=BATCH)
    weights_only = Settings(kind="sequential", rounds=ROUNDS, batch_size=BATCH, handoff="weights")
    reference = params(centralized(h, full, init, xy, optimizer("adam")))
    for settings, equal in ((full, True), (weights_only, False)):
        out = run(h, settings, init, xy, optimizer("adam"))
        split = {**out["c"].modules, **out[h.server].modules}
        assert close(params({n: split[n] for n in init}), reference) is equal, settings.handoff


@pytest.mark.parametrize(("cut", "opt", "policy", "lr"), [
    (1, "adam", "keep", "constant"), (2, "adam", "average", "constant"), (3, "adam", "reset", "constant"),
    (2, "sgd", "keep", "constant"), (2, "adam", "reset", "step"),
])
def test_splitfed_v1_equals_fedavg_of_the_whole_model_at_every_cut(cut, opt, policy, lr):
    h, init, xy = horizontal("vanilla", (cut,)), segments("vanilla", (cut,)), data()
    common = {"rounds": ROUNDS, "batch_size": BATCH, "optimizer_policy": policy, "seed": 1, "lr_schedule": lr,
              "lr_step_at": 0.5, "secure_aggregation": "off"}  # plain float averages of both halves, as the check says
    sfl = run(h, Settings(kind="splitfed_v1", **common), init, xy, optimizer(opt))
    fed = run(h, Settings(kind="fedavg", **common), init, xy, optimizer(opt), whole=True)
    for c in h.clients:
        split = {"bottom": sfl[c].modules["bottom"], "top": sfl[h.server].modules["top"]}
        assert close(params(split), params({n: fed[c].modules[n] for n in split})), c
    assert close(params(sfl["a"].modules), params(sfl["c"].modules), atol=0), "clients left a round unaveraged"
    assert not close(params(init), params(fed["a"].modules), atol=1e-3)


def vanilla_split(h, settings, init, xy, opt):
    """The ordinary engine: one client's pairwise topology, one SplitMachine per party per round."""
    (c, (x, y)), = xy.items()
    topology, mods = h.pair(c), {k: copy.deepcopy(m) for k, m in init.items()}
    client, server = {"bottom": mods["bottom"]}, {"top": mods["top"]}
    opts = {p: optimizer(opt)(params_of(m)) for p, m in ((c, client), (h.server, server))}
    for stage in compile_schedule(settings, clients=h.clients, server=h.server, rows={c: len(y)}):
        if stage.kind != TRAIN:
            continue
        plan = stage_plan(settings, stage, c, len(y))
        machines = {
            c: SplitMachine(name=c, topology=topology, modules=client, optimizer=opts[c], rng=PartyRng(0),
                            data={"bottom": (x,)}, patience=None),
            h.server: SplitMachine(name=h.server, topology=topology, modules=server, optimizer=opts[h.server],
                                   rng=PartyRng(1), labels=y, plan=plan, patience=None),
        }
        run_machines(connect(list(machines), session=b"v" * 16), machines)
    return mods


def params_of(modules):
    return [p for m in modules.values() for p in m.parameters()]


@pytest.mark.parametrize("kind", ["splitfed_v1", "splitfed_v2"])
def test_splitfed_with_one_client_equals_vanilla_split_training(kind):
    one = {"a": ROWS["a"]}
    h, init, xy = horizontal("vanilla", (2,), clients=one), segments("vanilla", (2,)), data(one)
    # keep: with one client an average changes nothing, so the optimizer carries over as in plain split training
    settings = Settings(kind=kind, rounds=ROUNDS, batch_size=BATCH, secure_aggregation="off", optimizer_policy="keep")
    out = run(h, settings, init, xy, optimizer("adam"))
    reference = vanilla_split(h, settings, init, xy, "adam")
    assert close(params({**out["a"].modules, **out[h.server].modules}), params({n: reference[n] for n in init}))
    assert not close(params(init), params(reference), atol=1e-3)


def splitfed_v2_reference(h, settings, init, xy, opt):
    """Plain PyTorch: a copy of the client segments per client, one server-side model taking their batches in the
    schedule's server order, and a row-weighted average of the client segments (weights and buffers) per round;
    under ``optimizer_policy="reset"`` every client starts each round with a fresh optimizer."""
    own = [n for n in init if n in h.client_segments]
    clients = {c: {n: copy.deepcopy(init[n]).train() for n in own} for c in h.clients}
    server = {n: copy.deepcopy(init[n]).train() for n in h.server_segments}
    opts = {c: opt(params_of(m)) for c, m in clients.items()}
    server_opt = opt(params_of(server))
    base = server_opt.param_groups[0]["lr"]
    for stage in compile_schedule(settings, clients=h.clients, server=h.server, rows=ROWS):
        if stage.kind != TRAIN:
            continue
        if settings.optimizer_policy == "reset":
            opts = {c: opt(params_of(m)) for c, m in clients.items()}
        for o in (*opts.values(), server_opt):  # every optimizer at the schedule's rate for this round
            for group in o.param_groups:
                group["lr"] = base * lr_scale(settings, stage.round)
        batches = {c: iter(stage_plan(settings, stage, c, ROWS[c]).batches(0)) for c in h.clients}
        steps = {c: len(stage_plan(settings, stage, c, ROWS[c]).batches(0)) for c in h.clients}
        for c in server_order(settings.interleave, steps):
            rows = torch.from_numpy(next(batches[c]))
            x, y = xy[c]
            model = nn.Sequential(*({**clients[c], **server}[n] for n in init))
            loss = LOSS(model(x[rows]), y[rows])
            opts[c].zero_grad()
            server_opt.zero_grad()
            loss.backward()
            opts[c].step()
            server_opt.step()
        total = sum(ROWS.values())
        for n in own:
            states = {c: clients[c][n].state_dict() for c in h.clients}
            mean = {}
            for key, value in states[h.clients[0]].items():
                acc = sum(states[c][key].double() * ROWS[c] for c in h.clients) / total
                mean[key] = acc.round().to(value.dtype) if not value.is_floating_point() else acc.to(value.dtype)
            for c in h.clients:
                clients[c][n].load_state_dict(mean)
    return {**clients[h.clients[0]], **server}


@pytest.mark.parametrize(("kind", "cuts"), [("vanilla", (2,)), ("u_shaped", (1, 3))])
def test_splitfed_v2_equals_its_single_process_reference_in_each_order(kind, cuts):
    h, init, xy = horizontal(kind, cuts), segments(kind, cuts), data()
    finals = {}
    for interleave, policy, lr in (("client_major", "keep", "constant"), ("batch_interleaved", "reset", "cosine")):
        settings = Settings(kind="splitfed_v2", rounds=ROUNDS, batch_size=BATCH, interleave=interleave,
                            optimizer_policy=policy, secure_aggregation="off", lr_schedule=lr,
                            lr_factor=0.2)  # exact float averages; both policies and a rate per round once
        out = run(h, settings, init, xy, optimizer("adam"))
        reference = splitfed_v2_reference(h, settings, init, xy, optimizer("adam"))
        split = {**out["b"].modules, **out[h.server].modules}
        finals[interleave] = params({n: split[n] for n in init})
        assert close(finals[interleave], params({n: reference[n] for n in init})), interleave
    assert not close(finals["client_major"], finals["batch_interleaved"], atol=1e-4), "the orders must differ"
