"""Optimizers by name, so configs can say ``optimizer = "adam"``.

Example:
    >>> import torch
    >>> make_optimizer("sgd", [torch.nn.Parameter(torch.zeros(1))], lr=0.1).__class__.__name__
    'SGD'
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from vsplit.models.registry import Registry

OPTIMIZERS: Registry[type[torch.optim.Optimizer]] = Registry("optimizer")
OPTIMIZERS.register("adam")(torch.optim.Adam)
OPTIMIZERS.register("adamw")(torch.optim.AdamW)
OPTIMIZERS.register("sgd")(torch.optim.SGD)


def make_optimizer(
    name: str, params: Iterable[torch.nn.Parameter], *, lr: float, weight_decay: float = 0.0
) -> torch.optim.Optimizer:
    """Build optimizer ``name`` over ``params``."""
    cls = OPTIMIZERS.get(name)
    kwargs: dict[str, object] = {"lr": lr, "weight_decay": weight_decay}
    if cls is torch.optim.SGD:
        kwargs["momentum"] = 0.9
    else:
        kwargs["fused"] = True  # one fused kernel per step instead of a Python loop over parameters
    return cls(list(params), **kwargs)


def clear_grads(optimizer: torch.optim.Optimizer) -> None:
    """Set the gradient of every parameter ``optimizer`` updates to ``None``.

    The effect of ``optimizer.zero_grad(set_to_none=True)``, without the profiler range and the grouping by device
    and dtype that it also does on every call: for the small models of split training that bookkeeping costs more
    than it saves, and a split step pays it once per party.

    >>> p = torch.nn.Parameter(torch.zeros(1)); p.grad = torch.ones(1)
    >>> clear_grads(torch.optim.SGD([p], lr=0.1)); p.grad is None
    True
    """
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None
