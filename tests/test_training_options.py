"""The learning-rate schedule and the moving average of the parameters (``train.lr_schedule``, ``train.ema``;
``SplitClassifier(lr_schedule=..., ema=...)``): bad values are refused naming the key, a party config carries them
to the party, each party's optimizer follows the schedule, and the average survives a checkpoint."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from test_config import PARTNER, write

from vsplit.config import load_config
from vsplit.config.recipe import recipe_checks
from vsplit.config.schema import TopologySection, TrainSection
from vsplit.errors import ConfigError, ProtocolError
from vsplit.estimator import SplitClassifier
from vsplit.models.averaging import ParameterAverage
from vsplit.models.rng import PartyRng
from vsplit.models.schedule import lr_factor
from vsplit.node.aligned import model_settings
from vsplit.protocol.training import SplitMachine
from vsplit.runtime.checkpoint import load_checkpoint, save_checkpoint
from vsplit.topology import Topology


@pytest.mark.parametrize(("train", "expected"), [
    ('lr_schedule = "linear"', r"train\.lr_schedule: must be one of constant, cosine; got 'linear'"),
    ("ema = 1.0", r"train\.ema: the decay of the parameters' moving average must be in \[0, 1\) \(0: off"),
    ("ema = -0.5", r"train\.ema: .* got -0\.5"),
])
def test_a_bad_schedule_or_average_in_a_party_config_names_the_key(tmp_path, train, expected):
    with pytest.raises(ConfigError, match=expected):
        load_config(write(tmp_path, PARTNER + f"[train]\n{train}\n"))


def test_a_party_config_carries_the_schedule_and_the_average_to_the_party(tmp_path):
    config = load_config(write(tmp_path, PARTNER + '[train]\nlr_schedule = "cosine"\nema = 0.99\n'))
    settings = model_settings(config)
    assert (settings.lr_schedule, settings.ema) == ("cosine", 0.99)


def test_a_horizontal_run_refuses_both(tmp_path):
    config = load_config(write(tmp_path, PARTNER))
    horizontal = dataclasses.replace(config, topology=TopologySection(kind="horizontal"),
                                     train=TrainSection(lr_schedule="cosine", ema=0.9))
    errors = " ".join(recipe_checks(horizontal))
    assert "train.lr_schedule: a horizontal run sets its learning rate per round" in errors
    assert "train.ema: a horizontal run averages" in errors


@pytest.mark.parametrize(("param", "expected"), [({"lr_schedule": "step"}, r"lr_schedule: must be one of"),
                                                  ({"ema": 1.5}, r"ema: the decay .* got 1\.5")])
def test_the_estimator_refuses_a_bad_schedule_or_average(views, param, expected):
    with pytest.raises(ConfigError, match=expected):
        SplitClassifier(label_party="bank", label="y", epochs=1, **param).fit(views)


def machine(*, epochs: int, ema: float = 0.0, keep_best: bool = True, schedule: str = "cosine") -> SplitMachine:
    from test_oracle import make_data, make_labels, modules_for

    from vsplit.protocol.training import Plan
    from vsplit.protocol.training.messages import ROLE_TRAIN, ROLE_VALID

    topology = Topology.vertical(label_party="bank", feature_parties=[], width=4).placed_on("bank")
    modules = modules_for(topology, 1)
    params = [p for m in modules.values() for p in m.parameters()]
    n = 64
    roles = np.full(n, ROLE_TRAIN, np.uint8)
    roles[:16] = ROLE_VALID
    return SplitMachine(name="bank", topology=topology, modules=modules, optimizer=torch.optim.SGD(params, lr=0.1),
                        rng=PartyRng(0), data=make_data(topology, n), labels=make_labels("binary", n),
                        plan=Plan(epochs=epochs, batch_size=16, seed=0, roles=roles), patience=None,
                        lr_schedule=schedule, ema=ema, keep_best=keep_best)


def test_each_epoch_trains_at_the_cosine_rate(one_thread):
    m = machine(epochs=4)
    seen = []
    m.callbacks = [type("Rate", (), {"on_step": lambda self, e, s, n, loss: seen.append(
        (e, m.optimizer.param_groups[0]["lr"]))})()]
    m.start()
    assert m.done
    rates = dict(seen)
    assert [round(rates[e], 6) for e in range(4)] == [round(0.1 * lr_factor("cosine", e, 4), 6) for e in range(4)]
    assert math.isclose(rates[2], 0.05)


def test_an_average_needs_the_kept_best_weights():
    with pytest.raises(ProtocolError, match="keep_best=False forbids"):
        machine(epochs=1, ema=0.9, keep_best=False)


def test_the_average_survives_a_checkpoint(tmp_path, one_thread):
    m = machine(epochs=2, ema=0.9)
    states = []
    m.on_epoch_end = states.append
    m.start()
    path = tmp_path / "bank.npz"
    save_checkpoint(path, states[0], run_id="r", party="bank")
    resumed = machine(epochs=2, ema=0.9)
    resumed.load_state(load_checkpoint(path, run_id="r", party="bank"))
    average = resumed._average
    assert isinstance(average, ParameterAverage) and average.updates == states[0]["average"]["updates"] > 0
    for a, b in zip(average.average, states[0]["average"]["average"], strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ProtocolError, match="no moving average of the parameters"):
        machine(epochs=2, ema=0.9).load_state({**states[0], "average": None})
