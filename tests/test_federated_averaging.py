"""The row-weighted average of state dicts and optimizer states: properties, a hand computation, refusals."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from vsplit.errors import ConfigError
from vsplit.federated.averaging import (
    INTEGER_POLICIES,
    average_optimizer_states,
    average_states,
    next_optimizer_states,
)

SHAPES = {"layer.weight": (3, 2), "layer.bias": (3,), "bn.num_batches_tracked": ()}
finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, width=32)


@st.composite
def clients(draw, *, low: int = 1, high: int = 5):
    """A list of client states (same keys and shapes) and their row counts."""
    n = draw(st.integers(low, high))
    states = []
    for _ in range(n):
        state = {}
        for name, shape in SHAPES.items():
            size = int(torch.Size(shape).numel())
            if name.endswith("num_batches_tracked"):
                state[name] = torch.tensor(draw(st.integers(0, 10_000)), dtype=torch.int64)
            else:
                state[name] = torch.tensor(draw(st.lists(finite, min_size=size, max_size=size)),
                                           dtype=torch.float32).reshape(shape)
        states.append(state)
    weights = draw(st.lists(st.integers(1, 30_000), min_size=n, max_size=n))
    return states, weights


def close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.allclose(a[k].double(), b[k].double(), rtol=1e-6, atol=1e-4) for k in a
    )


@settings(max_examples=40, deadline=None)
@given(clients(low=1, high=1))
def test_one_client_gets_its_own_state_back_exactly(case):
    states, weights = case
    out = average_states(states, weights)
    assert all(torch.equal(out[k], states[0][k]) for k in states[0])


@settings(max_examples=40, deadline=None)
@given(clients(low=2), st.integers(1, 1000))
def test_equal_weights_give_the_plain_mean(case, rows):
    states, _ = case
    out = average_states(states, [rows] * len(states))
    for name in ("layer.weight", "layer.bias"):
        mean = torch.stack([s[name].double() for s in states]).mean(0)
        assert torch.allclose(out[name].double(), mean, rtol=1e-6, atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(clients(low=2), st.randoms(use_true_random=False))
def test_the_order_of_the_clients_does_not_matter(case, rnd):
    states, weights = case
    order = list(range(len(states)))
    rnd.shuffle(order)
    shuffled = average_states([states[i] for i in order], [weights[i] for i in order])
    assert close(average_states(states, weights), shuffled)
    # counters are exact integers whatever the order
    assert torch.equal(shuffled["bn.num_batches_tracked"], average_states(states, weights)["bn.num_batches_tracked"])


@settings(max_examples=40, deadline=None)
@given(clients(low=2), st.integers(2, 50))
def test_scaling_every_weight_changes_nothing(case, factor):
    states, weights = case
    scaled = average_states(states, [w * factor for w in weights])
    base = average_states(states, weights)
    assert close(base, scaled)
    assert torch.equal(base["bn.num_batches_tracked"], scaled["bn.num_batches_tracked"])


@settings(max_examples=40, deadline=None)
@given(clients(low=2))
def test_every_entry_lies_between_the_clients_values(case):
    states, weights = case
    out = average_states(states, weights)
    for name in SHAPES:
        stacked = torch.stack([s[name] for s in states])
        assert bool((out[name] >= stacked.min(0).values).all()) and bool((out[name] <= stacked.max(0).values).all())


def test_a_hand_computation():
    a = {"w": torch.tensor([1.0, -2.0]), "n": torch.tensor(10)}
    b = {"w": torch.tensor([4.0, 0.0]), "n": torch.tensor(3)}
    c = {"w": torch.tensor([0.0, 8.0]), "n": torch.tensor(4)}
    # weights 1, 2, 5: w = (1*1 + 2*4 + 5*0) / 8 = 9/8, (1*-2 + 0 + 5*8) / 8 = 38/8
    out = average_states([a, b, c], [1, 2, 5])
    assert out["w"].tolist() == [1.125, 4.75]
    assert int(out["n"]) == 5  # (1*10 + 2*3 + 5*4) / 8 = 4.5, rounded half up
    assert int(average_states([a, b, c], [1, 2, 5], integers="max")["n"]) == 10
    assert int(average_states([a, b, c], [1, 2, 5], integers="sum")["n"]) == 17


def test_float16_and_integer_dtypes_are_kept():
    a = {"h": torch.tensor([1.0], dtype=torch.float16), "i": torch.tensor([1], dtype=torch.int32)}
    b = {"h": torch.tensor([2.0], dtype=torch.float16), "i": torch.tensor([2], dtype=torch.int32)}
    out = average_states([a, b], [1, 1])
    assert out["h"].dtype == torch.float16 and out["i"].dtype == torch.int32
    assert out["h"].item() == 1.5 and out["i"].item() == 2


def test_skipped_entries_stay_with_the_clients():
    a = {"w": torch.zeros(1), "bn.running_mean": torch.zeros(1)}
    assert list(average_states([a, a], [1, 1], skip={"bn.running_mean"})) == ["w"]


@pytest.mark.parametrize(
    ("other", "weights", "words"),
    [
        ({"w": torch.zeros(2)}, [1, 1], "missing ['n']"),
        ({"w": torch.zeros(3), "n": torch.tensor(1)}, [1, 1], "(3,) torch.float32 at client 1"),
        ({"w": torch.zeros(2, dtype=torch.float64), "n": torch.tensor(1)}, [1, 1], "torch.float64 at client 1"),
        ({"w": torch.zeros(2), "n": torch.tensor(1)}, [1, -1], "weight of client 1"),
        ({"w": torch.zeros(2), "n": torch.tensor(1)}, [0, 0], "sum to 0"),
        ({"w": torch.zeros(2), "n": torch.tensor(1)}, [1], "2 clients but 1 weights"),
    ],
)
def test_mismatched_clients_are_refused_with_a_clear_error(other, weights, words):
    mine = {"w": torch.zeros(2), "n": torch.tensor(1)}
    with pytest.raises(ConfigError) as caught:
        average_states([mine, other], weights)
    assert words in str(caught.value)


def test_an_unknown_policy_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="weighted_round, max, sum"):
        average_states([{"n": torch.tensor(1)}], [1], integers="median")
    with pytest.raises(ConfigError, match="reset, keep_local, average"):
        next_optimizer_states([{}], [1], policy="merge")


def adam_after(steps: int, grad: float, lr: float = 0.1) -> dict:
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([p], lr=lr)
    for _ in range(steps):
        p.grad = torch.full((3,), grad)
        opt.step()
    return opt.state_dict()


def test_adam_moments_are_row_weighted_and_steps_follow_the_integer_policy():
    a, b = adam_after(2, 1.0), adam_after(4, -3.0)
    out = average_optimizer_states([a, b], [3, 1])
    expected = (3 * a["state"][0]["exp_avg"].double() + b["state"][0]["exp_avg"].double()) / 4
    assert torch.allclose(out["state"][0]["exp_avg"].double(), expected, atol=1e-7)
    assert float(out["state"][0]["step"]) == 3.0  # (3*2 + 4) / 4 = 2.5, half up
    assert float(average_optimizer_states([a, b], [3, 1], integers="max")["state"][0]["step"]) == 4.0
    # the averaged state loads into a fresh optimizer and trains on
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([p], lr=0.1)
    opt.load_state_dict(out)
    p.grad = torch.ones(3)
    opt.step()
    assert float(opt.state_dict()["state"][0]["step"]) == 4.0


def test_the_three_optimizer_policies():
    a, b = adam_after(1, 1.0), adam_after(1, 2.0)
    assert next_optimizer_states([a, b], [1, 1], policy="reset") == [None, None]
    kept = next_optimizer_states([a, b], [1, 1], policy="keep_local")
    assert torch.equal(kept[1]["state"][0]["exp_avg"], b["state"][0]["exp_avg"])
    assert kept[1]["state"][0]["exp_avg"] is not b["state"][0]["exp_avg"]
    averaged = next_optimizer_states([a, b], [1, 1], policy="average")
    assert torch.equal(averaged[0]["state"][0]["exp_avg"], averaged[1]["state"][0]["exp_avg"])
    assert averaged[0]["state"][0]["exp_avg"] is not averaged[1]["state"][0]["exp_avg"]


def test_optimizers_with_other_settings_are_refused():
    with pytest.raises(ConfigError, match="param_groups differ"):
        average_optimizer_states([adam_after(1, 1.0, lr=0.1), adam_after(1, 1.0, lr=0.2)], [1, 1])


@pytest.mark.parametrize("policy", INTEGER_POLICIES)
def test_counters_with_fractional_weights(policy):
    states = [{"n": torch.tensor(v)} for v in (1, 2, 4)]
    out = int(average_states(states, [0.5, 0.25, 0.25], integers=policy)["n"])
    assert out == {"weighted_round": 2, "max": 4, "sum": 7}[policy]  # 0.5 + 0.5 + 1 = 2
