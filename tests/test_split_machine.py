"""One training machine driven directly, as h11 tests one endpoint: what it refuses, and that it stays bounded."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from vsplit.errors import ProtocolError
from vsplit.models.rng import PartyRng
from vsplit.models.tabular import TabularMLP
from vsplit.models.top import TopModel
from vsplit.protocol.training import Plan, SplitMachine
from vsplit.protocol.training.messages import PREDICT, TRAIN, Activations, Gradients, Ready
from vsplit.topology import Topology

N, WIDTH = 64, 4
VERTICAL = Topology.vertical(label_party="bank", feature_parties=["shop", "telco"], width=WIDTH)


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.zeros(N, 0, dtype=torch.long), torch.randn(N, 3, generator=g)


def bank(topology: Topology = VERTICAL) -> SplitMachine:
    torch.manual_seed(0)
    bottom = TabularMLP(cardinalities=[], n_numeric=3, hidden=(8,), out_dim=WIDTH)
    top = TopModel(widths={i: WIDTH for i in topology.segment("top").inputs}, hidden=(8,))
    plan = Plan(epochs=2, batch_size=16, seed=1, roles=np.zeros(N, np.uint8))
    return SplitMachine(name="bank", topology=topology, modules={"bank": bottom, "top": top},
                        optimizer=torch.optim.SGD([*bottom.parameters(), *top.parameters()], lr=0.1),
                        rng=PartyRng(0), data={"bank": inputs(0)}, labels=(torch.rand(N) < 0.5).float(), plan=plan)


def ready(machine: SplitMachine, *parties: str) -> None:
    for p in parties:
        machine.receive(p, Ready(resume_epoch=-1, topology=machine.topology.view_fingerprint(p)))


def activations(topology: Topology, party: str, *, step: int = 0, rows: int = 16, width: int = WIDTH) -> Activations:
    cut = next(c for c in topology.cuts if c.src_owner == party)
    return Activations(cut=cut.id, slot=0, phase=TRAIN, epoch=0, step=step,
                       values=np.zeros((rows, width), np.float32))


def test_training_starts_only_when_every_partner_is_ready():
    m = bank()
    assert m.start() == []
    ready(m, "shop")
    with pytest.raises(ProtocolError, match="not expected now"):
        m.receive("shop", Ready(resume_epoch=-1, topology=m.topology.view_fingerprint("shop")))
    ready(m, "telco")
    assert m._phase == TRAIN and m.step == 0


def test_partner_with_another_topology_is_refused_with_both_fingerprints():
    m = bank()
    other = Topology.vertical(label_party="bank", feature_parties=["shop"], width=WIDTH + 1)
    with pytest.raises(ProtocolError, match="configured with another topology") as info:
        m.receive("shop", Ready(resume_epoch=-1, topology=other.view_fingerprint("shop")))
    assert info.value.code == 5  # CONFIG_MISMATCH: the partner learns only this code


def test_a_partner_that_floods_the_hub_ahead_of_the_protocol_is_refused():
    m = bank()
    ready(m, "shop", "telco")
    m.receive("shop", activations(VERTICAL, "shop", step=0))
    with pytest.raises(ProtocolError, match="ahead of the protocol"):
        m.receive("shop", activations(VERTICAL, "shop", step=1))  # step 1 before step 0 has even run
    assert all(key[4] == 0 for key in m._inbox)  # nothing past what an honest partner can have outstanding was kept


def test_a_duplicate_step_is_refused():
    m = bank()
    ready(m, "shop", "telco")
    m.receive("shop", activations(VERTICAL, "shop"))
    with pytest.raises(ProtocolError, match="out of order"):
        m.receive("shop", activations(VERTICAL, "shop"))


def test_activations_of_the_wrong_width_or_batch_size_are_refused():
    m = bank()
    ready(m, "shop", "telco")
    with pytest.raises(ProtocolError, match="expected \\(4,\\)"):
        m.receive("shop", activations(VERTICAL, "shop", width=WIDTH + 1))
    m = bank()  # a refused message ends the run; start over for the next case
    ready(m, "shop", "telco")
    m.receive("telco", activations(VERTICAL, "telco", rows=15))
    with pytest.raises(ProtocolError, match="the batch has 16"):
        m.receive("shop", activations(VERTICAL, "shop"))


def test_a_party_cannot_send_on_another_partys_cut_or_send_gradients_to_the_hub():
    m = bank()
    ready(m, "shop", "telco")
    with pytest.raises(ProtocolError, match="not its own"):
        m.receive("shop", activations(VERTICAL, "telco"))
    cut = VERTICAL.cuts[0]
    with pytest.raises(ProtocolError, match="not its own"):
        m.receive("shop", Gradients(cut=cut.id, slot=0, epoch=0, step=0, values=np.zeros((16, WIDTH), np.float32)))


def test_non_finite_activations_are_refused():
    m = bank()
    ready(m, "shop", "telco")
    bad = activations(VERTICAL, "shop")
    bad.values[0, 0] = np.nan
    m.receive("telco", activations(VERTICAL, "telco"))
    with pytest.raises(ProtocolError, match="non-finite"):
        m.receive("shop", bad)


def test_a_stranger_is_refused():
    m = bank()
    with pytest.raises(ProtocolError, match="not a peer"):
        m.receive("mallory", Ready(resume_epoch=-1, topology="0" * 32))


def test_an_honest_step_answers_each_partner_with_its_own_gradient():
    m = bank()
    ready(m, "shop", "telco")
    assert m.receive("shop", activations(VERTICAL, "shop")) == []  # waits for telco
    out = m.receive("telco", activations(VERTICAL, "telco"))
    assert sorted(o.to for o in out) == ["shop", "telco"]
    assert all(isinstance(o.message, Gradients) and o.message.step == 0 for o in out)
    assert m.step == 1 and not m._inbox


def test_in_scoring_a_partner_that_has_sent_every_chunk_is_owed_nothing_though_the_hub_has_not_used_them():
    m = bank()
    m = SplitMachine(name="bank", topology=VERTICAL, modules=m.modules, optimizer=m.optimizer, rng=PartyRng(0),
                     data={"bank": inputs(0)}, plan=Plan.scoring(N, chunk=16))  # 4 chunks
    ready(m, "shop", "telco")
    for step in range(4):  # telco is fast: every chunk arrives before any of shop's, and it may close now
        m.receive("telco", dataclasses.replace(activations(VERTICAL, "telco", step=step), phase=PREDICT))
    assert not m.expects("telco") and m.expects("shop")  # what a pump asks when telco closes its channel
    for step in range(4):
        m.receive("shop", dataclasses.replace(activations(VERTICAL, "shop", step=step), phase=PREDICT))
    assert m.done and not m.expects("shop")
