"""Training resumes from per-party checkpoints and ends exactly where an uninterrupted run ends."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from vsplit.errors import CheckpointError, VsplitError
from vsplit.models.rng import PartyRng
from vsplit.models.tabular import TabularMLP
from vsplit.models.top import TopModel
from vsplit.protocol.training import Plan, SplitMachine
from vsplit.protocol.training.messages import Gradients
from vsplit.runtime.checkpoint import load_checkpoint, save_checkpoint
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.topology import Topology

TOPOLOGY = Topology.vertical(label_party="bank", feature_parties=["partner"], width=4)

N = 96


class Killed(Exception):
    pass


def build(seed=0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(1)
    data = {p: (torch.zeros(N, 0, dtype=torch.long), torch.randn(N, 3, generator=g)) for p in ("bank", "partner")}
    bottoms = {p: TabularMLP(cardinalities=[], n_numeric=3, hidden=(8,), out_dim=4, dropout=0.2) for p in data}
    top = TopModel(widths={"bank": 4, "partner": 4}, hidden=(8,))
    labels = (data["partner"][1][:, 0] + torch.randn(N, generator=g) > 0.5).float()
    roles = np.zeros(N, np.uint8)
    roles[::5] = 1
    return data, bottoms, top, labels, Plan(epochs=5, batch_size=16, seed=3, roles=roles)


def machines(setup, store, *, resume=None, kill_partner_at=None):
    data, bottoms, top, labels, plan = setup
    resume = resume or {}

    def saver(party):
        def save(state):
            store[(party, state["epoch"])] = copy.deepcopy(state)
        return save

    partner_bottom = bottoms["partner"]
    partner = SplitMachine(
        name="partner", topology=TOPOLOGY, modules={"partner": partner_bottom},
        optimizer=torch.optim.Adam(partner_bottom.parameters(), lr=0.01), data={"partner": data["partner"]},
        rng=PartyRng(7),
        resume_epoch=resume.get("partner", -1), restore=lambda e: store[("partner", e)], on_epoch_end=saver("partner"),
    )
    if kill_partner_at is not None:
        original = partner.receive

        def dying(sender, msg):
            if isinstance(msg, Gradients) and (msg.epoch, msg.step) == kill_partner_at:
                raise Killed
            return original(sender, msg)

        partner.receive = dying
    bank = SplitMachine(
        name="bank", topology=TOPOLOGY, plan=plan, modules={"bank": bottoms["bank"], "top": top},
        data={"bank": data["bank"]},
        labels=labels, optimizer=torch.optim.Adam([*top.parameters(), *bottoms["bank"].parameters()], lr=0.01),
        rng=PartyRng(8), patience=None,
        resume_epoch=resume.get("bank", -1), restore=lambda e: store[("bank", e)], on_epoch_end=saver("bank"),
    )
    return {"bank": bank, "partner": partner}


def params(setup):
    _, bottoms, top, _, _ = setup
    return [p.detach().clone() for m in (bottoms["bank"], bottoms["partner"], top) for p in m.parameters()]


def test_partner_killed_mid_epoch_then_both_resume_to_the_same_model():
    reference = build()
    run_machines(connect(["bank", "partner"], session=b"a" * 16), machines(reference, {}))

    store: dict = {}
    crashed = build()
    with pytest.raises(Killed):
        run_machines(connect(["bank", "partner"], session=b"b" * 16), machines(crashed, store, kill_partner_at=(2, 3)))
    assert max(e for p, e in store if p == "partner") == 1  # epochs 0 and 1 were checkpointed

    # both processes restart from scratch (fresh objects) and resume from their checkpoints
    restarted = build(seed=99)  # different initial weights: everything must come from the checkpoints
    last = {p: max(e for q, e in store if q == p) for p in ("bank", "partner")}
    result = run_machines(connect(["bank", "partner"], session=b"c" * 16), machines(restarted, store, resume=last))
    assert [h["epoch"] for h in result["bank"].history] == [0, 1, 2, 3, 4]
    for a, b in zip(params(reference), params(restarted), strict=True):
        assert torch.equal(a, b)


def test_label_party_ahead_by_one_epoch_resumes_from_the_common_epoch():
    reference = build()
    run_machines(connect(["bank", "partner"], session=b"a" * 16), machines(reference, {}))
    store: dict = {}
    crashed = build()
    with pytest.raises(Killed):
        run_machines(connect(["bank", "partner"], session=b"b" * 16), machines(crashed, store, kill_partner_at=(3, 0)))
    del store[("partner", 2)]  # the partner died before writing its epoch-2 checkpoint; the bank has it
    restarted = build(seed=5)
    resumed = machines(restarted, store, resume={"bank": 2, "partner": 1})
    run_machines(connect(["bank", "partner"], session=b"c" * 16), resumed)
    for a, b in zip(params(reference), params(restarted), strict=True):
        assert torch.equal(a, b)


def test_checkpoint_of_another_run_or_party_is_refused(tmp_path):
    path = tmp_path / "partner.npz"
    save_checkpoint(path, {"epoch": 1}, run_id="pilot-1", party="partner")
    with pytest.raises(CheckpointError, match="belongs to run 'pilot-1', not 'pilot-2'"):
        load_checkpoint(path, run_id="pilot-2", party="partner")
    with pytest.raises(CheckpointError, match="belongs to party 'partner', not 'bank'"):
        load_checkpoint(path, run_id="pilot-1", party="bank")
    path.write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="unreadable"):
        load_checkpoint(path, run_id="pilot-1", party="partner")


def test_checkpoint_round_trips_model_and_optimizer_state(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": torch.get_rng_state()}
    save_checkpoint(tmp_path / "c.npz", state, run_id="r", party="p")
    loaded = load_checkpoint(tmp_path / "c.npz", run_id="r", party="p")
    clone = torch.optim.Adam(torch.nn.Linear(3, 2).parameters())
    clone.load_state_dict(loaded["optimizer"])
    assert torch.equal(loaded["rng"], state["rng"])
    for k, v in state["model"].items():
        assert torch.equal(loaded["model"][k], v)
    assert isinstance(loaded["optimizer"]["state"][0]["step"], torch.Tensor)
    assert issubclass(CheckpointError, VsplitError)
