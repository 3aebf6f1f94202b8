"""The oracle, for every topology: split training equals the same topology placed on one party, step for step, and
both equal a plain PyTorch loop over the same batches (same initial weights; SGD and Adam; three kinds of loss)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from vsplit.models.rng import PartyRng
from vsplit.models.segments import MLP
from vsplit.models.tabular import TabularMLP
from vsplit.models.tasks import make_task
from vsplit.models.top import TopModel
from vsplit.protocol.training import Plan, SplitMachine
from vsplit.protocol.training.messages import ROLE_TRAIN, ROLE_VALID
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.topology import Topology

N_STEPS, BATCH, N_VALID, WIDTH = 20, 16, 24, 4
TOPOLOGIES = {
    "vertical_2": lambda: Topology.vertical(label_party="bank", feature_parties=["shop"], width=WIDTH),
    "vertical_3": lambda: Topology.vertical(label_party="bank", feature_parties=["shop", "telco"], width=WIDTH),
    "vertical_3_no_label_features": lambda: Topology.vertical(
        label_party="bank", feature_parties=["shop", "telco"], label_has_features=False, width=WIDTH),
    "vanilla": lambda: Topology.vanilla(client="owner", server="lab", width=WIDTH),
    "u_shaped": lambda: Topology.u_shaped(client="bank", server="cloud", widths=(WIDTH, WIDTH + 1)),
}


def modules_for(topology: Topology, out_dim: int) -> dict[str, nn.Module]:
    torch.manual_seed(0)
    modules: dict[str, nn.Module] = {}
    for seg in topology.segments:
        if seg.is_source:
            modules[seg.name] = TabularMLP(cardinalities=[4, 4], n_numeric=3, hidden=(8,), out_dim=seg.shapes[0][0])
        elif seg.loss and seg.name == "top":
            modules[seg.name] = TopModel(widths={i: WIDTH for i in seg.inputs}, hidden=(8,), out_dim=out_dim)
        elif seg.loss:
            modules[seg.name] = nn.Sequential(nn.ReLU(), nn.Linear(topology.segment(seg.inputs[0]).shapes[0][0],
                                                                   out_dim))
        else:
            modules[seg.name] = MLP(WIDTH, hidden=(8,), out_dim=seg.shapes[0][0], final_activation=True)
    return modules


def make_labels(task: str, n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    if task == "binary":
        return (torch.rand(n, generator=g) < 0.3).float()
    if task == "multiclass":
        return torch.randint(0, 3, (n,), generator=g)
    return torch.randn(n, generator=g)


def make_data(topology: Topology, n: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    data = {}
    for i, seg in enumerate(s for s in topology.segments if s.is_source):
        g = torch.Generator().manual_seed(10 + i)
        data[seg.name] = (torch.randint(0, 4, (n, 2), generator=g), torch.randn(n, 3, generator=g))
    return data


def make_optimizer(kind: str, params):
    params = list(params)
    return torch.optim.SGD(params, lr=0.05, momentum=0.9) if kind == "sgd" else torch.optim.Adam(params, lr=0.01)


def plan_for(n: int) -> Plan:
    roles = np.full(n, ROLE_TRAIN, np.uint8)
    roles[np.random.default_rng(1).permutation(n)[:N_VALID]] = ROLE_VALID
    return Plan(epochs=1, batch_size=BATCH, seed=5, roles=roles)


def train_engine(topology, modules, data, labels, task, kind, plan):
    machines = {}
    for i, party in enumerate(topology.parties):
        own = {s.name: modules[s.name] for s in topology.segments_of(party)}
        coordinator = party == topology.label_owner
        machines[party] = SplitMachine(
            name=party, topology=topology, modules=own,
            optimizer=make_optimizer(kind, (p for m in own.values() for p in m.parameters())),
            rng=PartyRng(i), data={k: v for k, v in data.items() if k in own},
            labels=labels if coordinator else None, task=make_task(task), plan=plan if coordinator else None,
            patience=None,
        )
    run_machines(connect(list(topology.parties), session=b"o" * 16), machines)
    return machines[topology.label_owner].result


def forward_all(topology, modules, data, rows, given=None) -> dict[str, torch.Tensor]:
    """Every segment's output on batch ``rows``, in topological order; ``given`` replaces some segments' outputs."""
    out: dict[str, torch.Tensor] = {}
    for seg in topology.segments:
        m = modules[seg.name]
        if given and seg.name in given:
            out[seg.name] = given[seg.name]
        elif seg.is_source:
            out[seg.name] = m(*(t[rows] for t in data[seg.name]))
        elif len(seg.inputs) == 1:
            out[seg.name] = m(out[seg.inputs[0]])
        else:
            out[seg.name] = m({i: out[i] for i in seg.inputs})
    return out


def train_reference(topology, modules, data, labels, task, kind, plan):
    """Plain PyTorch: forward every segment in order, one loss, one backward, one optimizer step."""
    loss_fn = make_task(task).loss
    opt = make_optimizer(kind, (p for m in modules.values() for p in m.parameters()))
    for rows in plan.batches(0):
        rows = torch.from_numpy(rows)
        out = forward_all(topology, modules, data, rows)
        loss = loss_fn(out[topology.loss_segment.name], labels[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_split_equals_the_topology_placed_on_one_party(name, task, kind):
    topology = TOPOLOGIES[name]()
    n = N_STEPS * BATCH + N_VALID
    out_dim = 3 if task == "multiclass" else 1
    split_modules = modules_for(topology, out_dim)
    placed_modules, ref_modules = copy.deepcopy(split_modules), copy.deepcopy(split_modules)
    before = {k: [p.detach().clone() for p in m.parameters()] for k, m in split_modules.items()}
    data, labels, plan = make_data(topology, n), make_labels(task, n), plan_for(n)
    assert len(plan.batches(0)) == N_STEPS

    result = train_engine(topology, split_modules, data, labels, task, kind, plan)
    placed = topology.placed_on(topology.label_owner)
    assert placed.cuts == () and len(placed.parties) == 1
    train_engine(placed, placed_modules, data, labels, task, kind, plan)
    train_reference(topology, ref_modules, data, labels, task, kind, plan)

    assert len(result.history) == 1 and np.isfinite(result.history[0]["val_loss"])
    for seg, module in split_modules.items():
        moved = [not torch.equal(a, b) for a, b in zip(before[seg], module.parameters(), strict=True)]
        assert any(moved), f"segment {seg} did not train"
        for other in (placed_modules[seg], ref_modules[seg]):
            for a, b in zip(module.parameters(), other.parameters(), strict=True):
                assert torch.allclose(a, b, atol=1e-6), seg
