"""Row-weighted averages of model state dicts and optimizer states: the maths of SplitFed and FedAvg.

Theory of operation. Client ``i`` holds ``w_i`` training rows and a state dict ``s_i`` (name -> tensor). The average
is ``sum_i w_i s_i / sum_i w_i``, computed entry by entry in float64 and cast back to each entry's dtype, so one
client (or identical clients) gives back its state exactly and the result of each float entry lies in the convex hull
of the clients' values. Integer entries (BatchNorm's ``num_batches_tracked``, Adam's step counts) are counters, not
coordinates, and follow an explicit :data:`INTEGER_POLICIES` option:

- ``"weighted_round"`` (default): the row-weighted mean, rounded half up. The only one of the three that secure
  aggregation can compute too (it learns only weighted sums), so plain and secure runs agree.
- ``"max"``: the largest client's value (e.g. "the most batches any client has seen").
- ``"sum"``: the total over clients (e.g. "the batches seen by the federation").

Boolean entries must be equal at every client. Keys, shapes and dtypes must match at every client: a mismatch is
a :class:`~vsplit.errors.ConfigError` naming the client and the entry, never a silent broadcast.

What happens to the optimizer between rounds is one of :data:`OPTIMIZER_POLICIES`:

- ``"reset"``: every client starts the next round with a fresh optimizer (``None`` is returned per client);
- ``"keep_local"``: every client keeps its own optimizer state (its moments drift from the averaged weights);
- ``"average"``: Adam's moments (``exp_avg``, ``exp_avg_sq``, any float tensor of the state) are row-weighted
  averages like the weights, and the step counts follow the integer policy; every client gets the same state.

BatchNorm running statistics are ordinary float buffers of the state dict and are averaged with the weights; to
keep them local (FedBN style) leave their names out with ``skip``.

API:
    ``average_states(states, weights, *, integers="weighted_round", skip=()) -> dict[str, Tensor]``
    ``average_optimizer_states(states, weights, *, integers="weighted_round") -> dict``
    ``next_optimizer_states(states, weights, *, policy, integers="weighted_round") -> list[dict | None]``

Example:
    >>> import torch
    >>> a = {"w": torch.tensor([0.0, 2.0]), "n": torch.tensor(3)}
    >>> b = {"w": torch.tensor([4.0, 6.0]), "n": torch.tensor(6)}
    >>> avg = average_states([a, b], [1, 3])
    >>> avg["w"].tolist(), int(avg["n"])
    ([3.0, 5.0], 5)
    >>> int(average_states([a, b], [1, 3], integers="sum")["n"])
    9
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch

from vsplit.errors import ConfigError

#: How integer entries (counters) are combined.
INTEGER_POLICIES: tuple[str, ...] = ("weighted_round", "max", "sum")
#: What each client's optimizer starts the next round with.
OPTIMIZER_POLICIES: tuple[str, ...] = ("reset", "keep_local", "average")


def check_weights(weights: Sequence[float], *, clients: int) -> list[float]:
    """Return the weights as floats after checking there is one per client, each >= 0, with a positive total.

    >>> check_weights([2, 0, 1], clients=3)
    [2.0, 0.0, 1.0]
    """
    if len(weights) != clients:
        raise ConfigError(f"averaging: {clients} clients but {len(weights)} weights; give one row count per client")
    out = []
    for i, w in enumerate(weights):
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w) or w < 0:
            raise ConfigError(f"averaging: weight of client {i} must be a finite number >= 0 (its rows), got {w!r}")
        out.append(float(w))
    if sum(out) <= 0:
        raise ConfigError("averaging: the weights sum to 0; at least one client must have rows")
    return out


def average_states(
    states: Sequence[Mapping[str, torch.Tensor]],
    weights: Sequence[float],
    *,
    integers: str = "weighted_round",
    skip: Collection[str] = (),
) -> dict[str, torch.Tensor]:
    """The row-weighted average of the clients' state dicts (see the module docstring for the policies).

    Args:
        states: One state dict per client, all with the same keys, shapes and dtypes.
        weights: Each client's row count (>= 0, positive total).
        integers: One of :data:`INTEGER_POLICIES`, for integer tensors.
        skip: Names left out of the result (entries every client keeps for itself, e.g. FedBN's statistics).

    Returns:
        A new state dict, in the first client's key order, of new tensors on the first client's devices.

    Raises:
        ConfigError: no client, bad weights, unknown policy, or mismatched keys, shapes or dtypes.
    """
    if not states:
        raise ConfigError("averaging: no client state to average")
    w = check_weights(weights, clients=len(states))
    _policy("integers", integers, INTEGER_POLICIES)
    first = states[0]
    for i, state in enumerate(states[1:], start=1):
        if set(state) != set(first):
            missing, extra = sorted(set(first) - set(state)), sorted(set(state) - set(first))
            raise ConfigError(
                f"averaging: client {i}'s state differs from client 0's: missing {missing}, extra {extra}; "
                "every client must run the same architecture"
            )
    return {
        name: _average_entry(name, [state[name] for state in states], w, integers=integers)
        for name in first
        if name not in skip
    }


def average_optimizer_states(
    states: Sequence[Mapping[str, Any]], weights: Sequence[float], *, integers: str = "weighted_round"
) -> dict[str, Any]:
    """The row-weighted average of ``torch.optim`` state dicts (Adam's moments and step counts, SGD's momentum).

    Every client's ``param_groups`` must be equal (same hyper-parameters, same parameter indices) and every
    parameter must have the same per-parameter entries. Float tensors are averaged like weights; integer tensors,
    Python numbers and Adam's float ``step`` tensors are counters and follow ``integers``.

    Example:
        >>> import torch
        >>> p = torch.nn.Parameter(torch.zeros(2))
        >>> opts = [torch.optim.Adam([p], lr=0.1) for _ in range(2)]
        >>> for k, opt in enumerate(opts):
        ...     for _ in range(k + 1):
        ...         p.grad = torch.ones(2); opt.step()
        >>> avg = average_optimizer_states([o.state_dict() for o in opts], [1, 1])
        >>> float(avg["state"][0]["step"]), sorted(avg["state"][0])
        (2.0, ['exp_avg', 'exp_avg_sq', 'step'])
    """
    if not states:
        raise ConfigError("averaging: no optimizer state to average")
    w = check_weights(weights, clients=len(states))
    _policy("integers", integers, INTEGER_POLICIES)
    first = states[0]
    for i, state in enumerate(states[1:], start=1):
        if state.get("param_groups") != first.get("param_groups"):
            raise ConfigError(
                f"averaging: client {i}'s optimizer param_groups differ from client 0's; "
                "every client must use the same optimizer settings"
            )
        if set(state.get("state", {})) != set(first.get("state", {})):
            raise ConfigError(f"averaging: client {i}'s optimizer holds state for other parameters than client 0's")
    averaged: dict[Any, dict[str, Any]] = {}
    for index, entries in first.get("state", {}).items():
        per_client = [state["state"][index] for state in states]
        for i, entry in enumerate(per_client):
            if set(entry) != set(entries):
                raise ConfigError(f"averaging: client {i}'s optimizer state of parameter {index} has other entries")
        averaged[index] = {
            key: _average_optimizer_entry(f"state[{index}].{key}", [e[key] for e in per_client], w, integers=integers)
            for key in entries
        }
    return {"state": averaged, "param_groups": copy.deepcopy(first.get("param_groups", []))}


def next_optimizer_states(
    states: Sequence[Mapping[str, Any]],
    weights: Sequence[float],
    *,
    policy: str,
    integers: str = "weighted_round",
) -> list[dict[str, Any] | None]:
    """What each client's optimizer starts the next round with, under ``policy`` (:data:`OPTIMIZER_POLICIES`).

    Returns one entry per client: ``None`` for ``"reset"`` (build a fresh optimizer), a deep copy of the client's
    own state for ``"keep_local"``, a deep copy of the averaged state for ``"average"``; load a dict with
    ``optimizer.load_state_dict``.

    >>> next_optimizer_states([{}, {}], [1, 1], policy="reset")
    [None, None]
    """
    _policy("optimizer policy", policy, OPTIMIZER_POLICIES)
    if policy == "reset":
        check_weights(weights, clients=len(states))
        return [None] * len(states)
    if policy == "keep_local":
        check_weights(weights, clients=len(states))
        return [copy.deepcopy(dict(state)) for state in states]
    averaged = average_optimizer_states(states, weights, integers=integers)
    return [copy.deepcopy(averaged) for _ in states]


def _policy(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"averaging: unknown {what} {value!r}; choose one of {', '.join(choices)}")


def _average_entry(name: str, values: list[torch.Tensor], w: list[float], *, integers: str) -> torch.Tensor:
    """Average one state-dict entry over the clients."""
    first = values[0]
    for i, value in enumerate(values):
        if not isinstance(value, torch.Tensor):
            raise ConfigError(f"averaging: {name!r} of client {i} is a {type(value).__name__}, not a tensor")
        if value.shape != first.shape or value.dtype != first.dtype:
            raise ConfigError(
                f"averaging: {name!r} is {tuple(value.shape)} {value.dtype} at client {i} but "
                f"{tuple(first.shape)} {first.dtype} at client 0; every client must run the same architecture"
            )
    if first.dtype == torch.bool:
        if any(not torch.equal(value, first) for value in values):
            raise ConfigError(f"averaging: boolean entry {name!r} differs between clients and cannot be averaged")
        return first.detach().clone()
    if first.is_complex():
        raise ConfigError(f"averaging: complex entry {name!r} is not supported")
    if first.is_floating_point():
        return _weighted_mean(values, w).to(dtype=first.dtype, device=first.device)
    return _combine_counters(values, w, integers=integers).to(dtype=first.dtype, device=first.device)


def _weighted_mean(values: list[torch.Tensor], w: list[float]) -> torch.Tensor:
    """``sum_i w_i x_i / sum_i w_i`` in float64 (weights normalised first, so one client gives ``x * 1.0``)."""
    total = sum(w)
    out = torch.zeros(values[0].shape, dtype=torch.float64)
    for value, weight in zip(values, w, strict=True):
        if weight:
            out += value.detach().to(device="cpu", dtype=torch.float64) * (weight / total)
    return out


def _combine_counters(values: list[torch.Tensor], w: list[float], *, integers: str) -> torch.Tensor:
    """Combine integer-valued tensors under the integer policy, in exact integer arithmetic where the weights
    are whole numbers."""
    stacked = torch.stack([value.detach().to(device="cpu", dtype=torch.int64) for value in values])
    if integers == "max":
        return stacked.max(dim=0).values
    if integers == "sum":
        return stacked.sum(dim=0)
    if all(weight.is_integer() for weight in w):
        weight = torch.tensor([int(x) for x in w], dtype=torch.int64).reshape(-1, *([1] * (stacked.dim() - 1)))
        total = int(sum(w))
        return torch.div(2 * (stacked * weight).sum(dim=0) + total, 2 * total, rounding_mode="floor")
    return torch.floor(_weighted_mean(list(stacked), w) + 0.5).to(torch.int64)


def _average_optimizer_entry(name: str, values: list[Any], w: list[float], *, integers: str) -> Any:
    """Average one per-parameter optimizer entry: float tensors as weights, counters by ``integers``."""
    first = values[0]
    if isinstance(first, torch.Tensor):
        if name.endswith(".step") and first.is_floating_point():  # Adam's step: a float tensor holding a count
            for i, value in enumerate(values):
                if not isinstance(value, torch.Tensor) or value.shape != first.shape:
                    raise ConfigError(f"averaging: optimizer {name} of client {i} does not match client 0's")
            counts = [value.detach().round().to(torch.int64) for value in values]
            return _combine_counters(counts, w, integers=integers).to(dtype=first.dtype, device=first.device)
        return _average_entry(f"optimizer {name}", values, w, integers=integers)
    if isinstance(first, bool) or not isinstance(first, numbers.Real):
        if any(value != first for value in values):
            raise ConfigError(f"averaging: optimizer {name} differs between clients and is not a number")
        return copy.deepcopy(first)
    if not all(isinstance(value, numbers.Real) and not isinstance(value, bool) for value in values):
        raise ConfigError(f"averaging: optimizer {name} is a number at client 0 but not at every client")
    counts = [torch.tensor(round(value), dtype=torch.int64) for value in values]
    combined = int(_combine_counters(counts, w, integers=integers))
    return float(combined) if isinstance(first, float) else combined
