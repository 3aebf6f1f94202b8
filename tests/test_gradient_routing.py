"""Each party receives exactly the gradient of its own embeddings, never another party's."""

from __future__ import annotations

import copy

import numpy as np
import torch

from vsplit.models.rng import PartyRng
from vsplit.models.tabular import TabularMLP
from vsplit.models.top import TopModel
from vsplit.protocol.training import Plan, SplitMachine
from vsplit.protocol.training.messages import Gradients
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.topology import Topology


def test_each_party_receives_the_gradient_of_its_own_embeddings():
    n, batch, names = 32, 32, ["bank", "p1", "p2"]
    torch.manual_seed(3)
    inputs = {name: (torch.zeros(n, 0, dtype=torch.long), torch.randn(n, 3) * (i + 1)) for i, name in enumerate(names)}
    bottoms = {name: TabularMLP(cardinalities=[], n_numeric=3, hidden=(8,), out_dim=4) for name in names}
    top = TopModel(widths={name: 4 for name in names}, merge="concat", hidden=(8,))
    labels = (torch.rand(n) < 0.5).float()
    ref_bottoms, ref_top = copy.deepcopy(bottoms), copy.deepcopy(top)

    plan = Plan(epochs=1, batch_size=batch, seed=1, roles=np.zeros(n, np.uint8))
    received: dict[str, np.ndarray] = {}

    def tap(sender, recipient, msg, frame):
        if isinstance(msg, Gradients):
            received[recipient] = msg.values.copy()

    topology = Topology.vertical(label_party="bank", feature_parties=["p1", "p2"], width=4)
    machines = {
        "bank": SplitMachine(
            name="bank", topology=topology, modules={"bank": bottoms["bank"], "top": top},
            data={"bank": inputs["bank"]}, plan=plan, labels=labels,
            optimizer=torch.optim.SGD([*top.parameters(), *bottoms["bank"].parameters()], lr=0.1),
            rng=PartyRng(0), patience=None,
        ),
        **{
            p: SplitMachine(
                name=p, topology=topology, modules={p: bottoms[p]}, data={p: inputs[p]},
                optimizer=torch.optim.SGD(bottoms[p].parameters(), lr=0.1), rng=PartyRng(0),
            )
            for p in ("p1", "p2")
        },
    }
    run_machines(connect(names, session=b"r" * 16, taps=[tap]), machines)

    rows = plan.batches(0)[0]
    embeddings = {name: ref_bottoms[name](*(t[rows] for t in inputs[name])) for name in names}
    for e in embeddings.values():
        e.retain_grad()
    torch.nn.functional.binary_cross_entropy_with_logits(ref_top(embeddings), labels[rows]).backward()
    expected = {p: embeddings[p].grad.numpy() for p in ("p1", "p2")}

    assert set(received) == {"p1", "p2"}
    assert not np.allclose(expected["p1"], expected["p2"])  # a swap would be detectable
    for party in ("p1", "p2"):
        np.testing.assert_allclose(received[party], expected[party], atol=1e-7)
