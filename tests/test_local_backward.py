"""The label party sends the partners their gradients before it backpropagates its own bottom, with the same numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vsplit.models.rng import PartyRng
from vsplit.models.tabular import TabularMLP
from vsplit.models.top import TopModel
from vsplit.protocol.training import Plan, SplitMachine
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.topology import Topology
from vsplit.topology import program as program_module
from vsplit.topology.program import compile_program, format_program, local_tail

NAMES = ["bank", "p1", "p2"]


def test_the_bank_sends_the_gradients_before_its_own_bottom_is_backpropagated():
    t = Topology.vertical(label_party="bank", feature_parties=["p1", "p2"])
    assert format_program(compile_program(t, "bank")) == (
        "Forward(bank) AwaitActivations(p1>bank) AwaitActivations(p2>bank) Forward(top) Loss(top) Backward(top) "
        "SendGradients(p1>bank) SendGradients(p2>bank) BackwardLocal(bank) Step"
    )
    assert format_program(compile_program(t, "p1")) == (
        "Forward(p1) SendActivations(p1>bank) AwaitGradients(p1>bank) Backward(p1) Step"
    )


def test_segments_that_read_or_send_a_cut_or_hold_the_loss_are_never_deferred():
    no_features = Topology.vertical(label_party="bank", feature_parties=["p1"], label_has_features=False)
    assert "BackwardLocal" not in format_program(compile_program(no_features, "bank"))
    u = Topology.u_shaped(client="client", server="server")
    for party in ("client", "server"):
        assert "BackwardLocal" not in format_program(compile_program(u, party))
    vertical = Topology.vertical(label_party="bank", feature_parties=["p1"])
    assert local_tail(vertical, ("bank", "top")) == ("bank",)
    assert local_tail(vertical, ("p1",)) == ()  # it sends a cut


def _snapshot(bottoms: dict, top: torch.nn.Module) -> dict[str, dict[str, torch.Tensor]]:
    out = {name: {k: v.detach().clone() for k, v in bottoms[name].state_dict().items()} for name in NAMES}
    out["top"] = {k: v.detach().clone() for k, v in top.state_dict().items()}
    return out


def _train(seed: int = 3) -> tuple[dict, dict]:
    """Three parties, four batches of SGD with momentum; every party's parameters before and after them."""
    n, batch = 64, 16
    torch.manual_seed(seed)
    inputs = {name: (torch.zeros(n, 0, dtype=torch.long), torch.randn(n, 3) * (i + 1)) for i, name in enumerate(NAMES)}
    bottoms = {name: TabularMLP(cardinalities=[], n_numeric=3, hidden=(8,), out_dim=4) for name in NAMES}
    top = TopModel(widths={name: 4 for name in NAMES}, merge="concat", hidden=(8,))
    labels = (torch.rand(n) < 0.5).float()
    start = _snapshot(bottoms, top)
    plan = Plan(epochs=1, batch_size=batch, seed=1, roles=np.zeros(n, np.uint8))
    topology = Topology.vertical(label_party="bank", feature_parties=["p1", "p2"], width=4)
    machines = {
        "bank": SplitMachine(
            name="bank", topology=topology, modules={"bank": bottoms["bank"], "top": top},
            data={"bank": inputs["bank"]}, plan=plan, labels=labels,
            optimizer=torch.optim.SGD([*top.parameters(), *bottoms["bank"].parameters()], lr=0.1, momentum=0.9),
            rng=PartyRng(0), patience=None,
        ),
        **{
            p: SplitMachine(
                name=p, topology=topology, modules={p: bottoms[p]}, data={p: inputs[p]},
                optimizer=torch.optim.SGD(bottoms[p].parameters(), lr=0.1, momentum=0.9), rng=PartyRng(0),
            )
            for p in ("p1", "p2")
        },
    }
    run_machines(connect(NAMES, session=b"r" * 16), machines)
    return start, _snapshot(bottoms, top)


def test_deferring_the_bottom_gives_bit_for_bit_the_parameters_of_one_backward(monkeypatch: pytest.MonkeyPatch):
    start, deferred = _train()
    monkeypatch.setattr(program_module, "local_tail", lambda topology, comp: ())
    assert "BackwardLocal" not in format_program(
        compile_program(Topology.vertical(label_party="bank", feature_parties=["p1", "p2"]), "bank"))
    start_joint, joint = _train()
    for name in (*NAMES, "top"):
        for key, value in deferred[name].items():
            assert torch.equal(start[name][key], start_joint[name][key])
            assert torch.equal(value, joint[name][key]), (name, key)
            if value.is_floating_point():
                assert not torch.equal(value, start[name][key]), f"{name}.{key} did not train"
