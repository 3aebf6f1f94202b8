"""The oracle: split training equals centralized training of the same network, step for step."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from vsplit.models.rng import PartyRng
from vsplit.models.tabular import TabularMLP
from vsplit.models.top import TopModel
from vsplit.protocol.training import FeatureTrainer, LabelTrainer, Plan
from vsplit.runtime.inprocess import connect, run_machines

N_STEPS, BATCH = 20, 16


def make_party_data(seed: int, n: int, n_cat: int, n_num: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 4, (n, n_cat), generator=g), torch.randn(n, n_num, generator=g)


def make_setup(n_parties: int, merge: str):
    n = N_STEPS * BATCH
    torch.manual_seed(0)
    names = ["bank"] + [f"partner{i}" for i in range(1, n_parties)]
    data = {name: make_party_data(i, n, 2, 3) for i, name in enumerate(names)}
    bottoms = {name: TabularMLP(cardinalities=[4, 4], n_numeric=3, hidden=(8,), out_dim=4) for name in names}
    top = TopModel(widths={name: 4 for name in names}, merge=merge, hidden=(8,))
    labels = (torch.rand(n) < 0.3).float()
    return names, data, bottoms, top, labels


def optimizer_for(kind: str, params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9) if kind == "sgd" else torch.optim.Adam(params, lr=0.01)


def train_split(names, data, bottoms, top, labels, kind):
    plan = Plan(epochs=1, batch_size=BATCH, seed=5, roles=np.zeros(len(labels), np.uint8))
    bank, partners = names[0], names[1:]
    machines = {
        bank: LabelTrainer(
            name=bank,
            plan=plan,
            top=top,
            local={bank: (bottoms[bank], data[bank])},
            remote={p: 4 for p in partners},
            labels=labels,
            optimizer=optimizer_for(kind, [*top.parameters(), *bottoms[bank].parameters()]),
            rng=PartyRng(1),
            patience=None,
        )
    }
    for p in partners:
        machines[p] = FeatureTrainer(
            name=p,
            label_party=bank,
            model=bottoms[p],
            optimizer=optimizer_for(kind, bottoms[p].parameters()),
            inputs=data[p],
            rng=PartyRng(2),
        )
    run_machines(connect(names, session=b"o" * 16), machines)
    return plan


def train_centralized(names, data, bottoms, top, labels, kind, plan):
    params = [*top.parameters()] + [p for name in names for p in bottoms[name].parameters()]
    opt = optimizer_for(kind, params)
    for rows in plan.batches(0):
        embeddings = {name: bottoms[name](data[name][0][rows], data[name][1][rows]) for name in names}
        loss = torch.nn.functional.binary_cross_entropy_with_logits(top(embeddings), labels[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("n_parties", [2, 3])
@pytest.mark.parametrize("merge", ["concat", "mean"])
def test_split_training_equals_centralized_training(kind, n_parties, merge):
    names, data, bottoms, top, labels = make_setup(n_parties, merge)
    ref_bottoms, ref_top = copy.deepcopy(bottoms), copy.deepcopy(top)
    before = [p.detach().clone() for p in top.parameters()]
    plan = train_split(names, data, bottoms, top, labels, kind)
    assert len(plan.batches(0)) == N_STEPS
    train_centralized(names, data, ref_bottoms, ref_top, labels, kind, plan)
    # training moved the weights, and both runs moved them identically
    assert not all(torch.equal(a, b) for a, b in zip(before, top.parameters(), strict=True))
    for name in names:
        for a, b in zip(bottoms[name].parameters(), ref_bottoms[name].parameters(), strict=True):
            assert torch.allclose(a, b, atol=1e-6), name
    for a, b in zip(top.parameters(), ref_top.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
