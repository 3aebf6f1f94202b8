"""Label leakage in a U-shaped split: the server reads the labels off the gradients the client returns, unless a
label defense runs at the client; observers at either party only read."""

from __future__ import annotations

import pytest
import torch

from vsplit.privacy.synthetic import make_imbalanced_views, split_views
from vsplit.privacy.u_shaped import CLIENT, SERVER, run_u_shaped
from vsplit.protocol.training.hooks import TrainingHooks


@pytest.fixture(scope="module")
def tables():
    train, test = split_views(make_imbalanced_views(3000, seed=0), seed=0)
    pooled = [views["bank"].merge(views["partner"], on="customer_id") for views in (train, test)]
    return pooled


def test_the_server_reads_the_labels_unless_a_label_defense_runs(tables, one_thread):
    train, test = tables
    runs = {d: run_u_shaped(train, test, defense=d, seed=0, label="y", positive_label=1, epochs=10, batch_size=128)
            for d in ("none", "clip_noise", "marvell")}
    plain = runs["none"]
    assert plain["direction_leak_auc"] > 0.95 and plain["norm_leak_auc"] > 0.8 and plain["test_auc"] > 0.8
    for defense in ("clip_noise", "marvell"):
        run = runs[defense]
        assert run["direction_leak_auc"] < plain["direction_leak_auc"] - 0.2, (defense, run)
        assert run["norm_leak_auc"] < plain["norm_leak_auc"] - 0.1, (defense, run)
        assert run["test_auc"] > 0.6


def test_observers_at_the_client_and_the_server_leave_training_bit_identical(tables, one_thread):
    from vsplit.estimator import SplitClassifier

    train, _ = tables
    seen = {CLIENT: 0, SERVER: 0}

    def counter(party):
        def observe(values, info):
            seen[party] += 1
        return observe

    def fit(hooks):
        clf = SplitClassifier(label_party=CLIENT, label="y", positive_label=1, topology="u_shaped", server=SERVER,
                              epochs=1, random_state=0, hooks=hooks).fit({CLIENT: train})
        return [p for name in ("head", "middle", "tail") for p in clf._party(
            clf.topology_.segment(name).owner).segment_models[name].parameters()]

    plain = fit(None)
    watched = fit(TrainingHooks(observers={CLIENT: [counter(CLIENT)], SERVER: [counter(SERVER)]}))
    for a, b in zip(plain, watched, strict=True):
        assert torch.equal(a, b)
    assert seen[CLIENT] > 0 and seen[CLIENT] == seen[SERVER]  # each step: gradients back to the head and the middle
