"""The oracle for running ahead: a pipeline window and local steps equal a reference written directly in PyTorch.

The reference states the stale-gradient schedule of :mod:`vsplit.protocol.training.pipeline` in a few lines: with
window ``w`` a source party's forward of step ``t`` runs on a stash of its weights after updates ``0 .. t-w`` and
update ``t`` applies the gradient at that stash; with ``k`` local steps the party sends a group of ``k`` batches
with the group-start weights and updates on each batch's cached gradient, the first through the graph it sent and
the others through a fresh forward. The coordinator always steps at once with its own current weights.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import deque

import numpy as np
import pytest
import torch
from test_oracle import (
    BATCH,
    N_STEPS,
    N_VALID,
    forward_all,
    make_data,
    make_labels,
    make_optimizer,
    modules_for,
    plan_for,
    train_engine,
)

from vsplit.errors import ProtocolError
from vsplit.models.tasks import make_task
from vsplit.topology import Topology

WIDTH = 4
TOPOLOGIES = {
    "vertical_3": lambda: Topology.vertical(label_party="bank", feature_parties=["shop", "telco"], width=WIDTH),
    "vanilla": lambda: Topology.vanilla(client="owner", server="lab", width=WIDTH),
}


def _coordinator_step(topology, modules, data, labels, loss_fn, opt, rows, sent):
    """One fresh step of everything the coordinator owns, on the source parties' activations ``sent``."""
    leaves = {name: h.detach().requires_grad_() for name, h in sent.items()}
    out = forward_all(topology, modules, data, rows, given=leaves)
    loss = loss_fn(out[topology.loss_segment.name], labels[rows])
    opt.zero_grad()
    loss.backward()
    opt.step()
    return {name: leaf.grad for name, leaf in leaves.items()}


def _ahead_segments(topology):
    return [s.name for s in topology.segments if s.is_source and s.owner != topology.label_owner]


def _optimizers(topology, modules, kind):
    coord = [p for s in topology.segments if s.owner == topology.label_owner for p in modules[s.name].parameters()]
    opts = {name: make_optimizer(kind, modules[name].parameters()) for name in _ahead_segments(topology)}
    return make_optimizer(kind, coord), opts


def reference_window(topology, modules, data, labels, task, kind, plan, w):
    loss_fn = make_task(task).loss
    coord_opt, opts = _optimizers(topology, modules, kind)
    flight = {name: deque() for name in opts}

    def update(name, grad_of):
        stash, h, step = flight[name].popleft()
        opts[name].zero_grad()
        h.backward(grad_of[(name, step)])
        for p, s in zip(modules[name].parameters(), stash.values(), strict=True):
            p.grad = s.grad
        opts[name].step()

    grads = {}
    for t, rows in enumerate(plan.batches(0)):
        rows = torch.from_numpy(rows)
        sent = {}
        for name in opts:
            if len(flight[name]) == w:
                update(name, grads)
            stash = {n: p.detach().clone().requires_grad_() for n, p in modules[name].named_parameters()}
            h = torch.func.functional_call(modules[name], stash, tuple(x[rows] for x in data[name]))
            flight[name].append((stash, h, t))
            sent[name] = h
        for name, g in _coordinator_step(topology, modules, data, labels, loss_fn, coord_opt, rows, sent).items():
            grads[(name, t)] = g
    for name in opts:
        while flight[name]:
            update(name, grads)


def reference_local(topology, modules, data, labels, task, kind, plan, k):
    loss_fn = make_task(task).loss
    coord_opt, opts = _optimizers(topology, modules, kind)
    batches = [torch.from_numpy(b) for b in plan.batches(0)]
    for start in range(0, len(batches), k):
        group = batches[start : start + k]
        sent = {name: [] for name in opts}
        for name, m in modules.items():
            if name in opts:
                for i, rows in enumerate(group):
                    with torch.set_grad_enabled(i == 0):
                        sent[name].append(m(*(x[rows] for x in data[name])))
        grads = [_coordinator_step(topology, modules, data, labels, loss_fn, coord_opt, rows,
                                   {name: sent[name][i] for name in opts}) for i, rows in enumerate(group)]
        for name in opts:
            for i, rows in enumerate(group):
                h = sent[name][0] if i == 0 else modules[name](*(x[rows] for x in data[name]))
                opts[name].zero_grad()
                h.backward(grads[i][name])
                opts[name].step()


def _setup(name, task):
    topology = TOPOLOGIES[name]()
    n = N_STEPS * BATCH + N_VALID
    modules = modules_for(topology, 3 if task == "multiclass" else 1)
    return topology, modules, make_data(topology, n), make_labels(task, n), plan_for(n)


def _assert_same(a, b, *, atol=1e-6):
    for seg, module in a.items():
        for x, y in zip(module.parameters(), b[seg].parameters(), strict=True):
            assert torch.allclose(x, y, atol=atol), seg


def _assert_differs(a, b, segments):
    assert any(not torch.allclose(x, y, atol=1e-6) for s in segments
               for x, y in zip(a[s].parameters(), b[s].parameters(), strict=True)), "running ahead changed nothing"


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("w", [2, 3])
@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_pipeline_window_equals_the_stale_gradient_reference(name, w, kind):
    topology, modules, data, labels, plan = _setup(name, "binary")
    split, ref, exact = modules, copy.deepcopy(modules), copy.deepcopy(modules)
    result = train_engine(topology, split, data, labels, "binary", kind, dataclasses.replace(plan, window=w))
    reference_window(topology, ref, data, labels, "binary", kind, plan, w)
    train_engine(topology, exact, data, labels, "binary", kind, plan)
    assert np.isfinite(result.history[0]["val_loss"])
    _assert_same(split, ref)
    _assert_differs(split, exact, _ahead_segments(topology))


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_local_steps_equal_the_cached_gradient_reference(name, k, kind):
    topology, modules, data, labels, plan = _setup(name, "multiclass" if name == "vanilla" else "binary")
    task = "multiclass" if name == "vanilla" else "binary"
    split, ref, exact = modules, copy.deepcopy(modules), copy.deepcopy(modules)
    train_engine(topology, split, data, labels, task, kind, dataclasses.replace(plan, local_steps=k))
    reference_local(topology, ref, data, labels, task, kind, plan, k)
    train_engine(topology, exact, data, labels, task, kind, plan)
    _assert_same(split, ref)
    _assert_differs(split, exact, _ahead_segments(topology))


def test_window_one_is_the_exact_mode_bit_for_bit():
    topology, modules, data, labels, plan = _setup("vertical_3", "binary")
    a, b = modules, copy.deepcopy(modules)
    train_engine(topology, a, data, labels, "binary", "adam", dataclasses.replace(plan, window=1, local_steps=1))
    train_engine(topology, b, data, labels, "binary", "adam", plan)
    for seg in a:
        assert all(torch.equal(x, y) for x, y in zip(a[seg].parameters(), b[seg].parameters(), strict=True))


def test_u_shaped_refuses_to_run_ahead_with_the_reason():
    topology = Topology.u_shaped(client="bank", server="cloud", widths=(WIDTH, WIDTH + 1))
    n = N_STEPS * BATCH + N_VALID
    modules = modules_for(topology, 1)
    with pytest.raises(ProtocolError, match="also await activations"):
        train_engine(topology, modules, make_data(topology, n), make_labels("binary", n), "binary", "sgd",
                     dataclasses.replace(plan_for(n), window=2))


def test_a_partner_may_not_run_further_ahead_than_the_window():
    from test_split_machine import activations, bank, ready

    m = bank()
    m = type(m)(name="bank", topology=m.topology, modules=m.modules, optimizer=m.optimizer, rng=m.rng, data=m.data,
                labels=m.labels, plan=dataclasses.replace(m.plan, window=2))
    ready(m, "shop", "telco")
    m.receive("shop", activations(m.topology, "shop", step=0))
    m.receive("shop", activations(m.topology, "shop", step=1))  # within the window of 2
    with pytest.raises(ProtocolError, match="ahead of the protocol"):
        m.receive("shop", activations(m.topology, "shop", step=2))
