"""Modules users bring: their output width found by a dry forward pass, their weights reset from the run seed.

A module of your own for a segment is a plain ``nn.Module``. The estimator needs to know how wide its output is (a
cut declares the shape of what crosses it, and the default module after it is built for that width) and wants the
run to depend on ``random_state`` only, not on how the global torch generator happened to stand when you built the
module. :func:`output_width` runs the module once, without gradients and in eval mode, on a batch of two zero rows
shaped like its input, under a private random stream (your global generator is left untouched), and restores every
submodule's training flag. :func:`reset_parameters` calls ``reset_parameters()`` on every submodule that has one
(``nn.Linear``, ``nn.Conv2d``, ``nn.Embedding``, ``nn.BatchNorm1d``, ...), in ``module.modules()`` order, under a
private stream seeded with ``seed``; a parameter of a submodule without ``reset_parameters`` keeps its value.

Example:
    >>> import torch
    >>> from torch import nn
    >>> head = nn.Sequential(nn.Linear(3, 5), nn.Dropout(0.5), nn.ReLU())
    >>> output_width(head, (torch.zeros(7, 3),), seed=0), head.training
    (5, True)
    >>> a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    >>> reset_parameters(a, seed=1); reset_parameters(b, seed=1)
    >>> bool(torch.equal(a.weight, b.weight))
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from vsplit.errors import ConfigError, VsplitError
from vsplit.models.rng import PartyRng

#: Rows in the batch of a dry forward pass (two, so that batch statistics are defined).
PROBE_ROWS = 2


def output_width(module: nn.Module, example: Sequence[torch.Tensor], *, seed: int, name: str = "segment") -> int:
    """The width of ``module``'s flat output for inputs shaped like ``example`` (only their dtypes and trailing
    dimensions are used), found by one forward pass that changes neither the module nor the global random state."""
    batch = tuple(torch.zeros((PROBE_ROWS, *t.shape[1:]), dtype=t.dtype) for t in example)
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad(), PartyRng(seed):
            out = module(*batch)
    except VsplitError:
        raise
    except Exception as exc:  # the user's module: say which segment and what it was given
        shapes = [tuple(t.shape) for t in batch]
        raise ConfigError(f"segment {name!r}: a dry forward pass on inputs shaped {shapes} failed: {exc}") from exc
    finally:
        for m, mode in modes:
            m.training = mode
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != PROBE_ROWS:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ConfigError(f"segment {name!r}: returned {got} for {PROBE_ROWS} rows; a built-in topology carries one "
                          "flat (rows, width) tensor across each cut: flatten in the module, or pass a Topology")
    return int(out.shape[1])


def reset_parameters(module: nn.Module, *, seed: int) -> None:
    """Re-initialise ``module`` in place from ``seed``: ``reset_parameters()`` of each submodule that has one."""
    with PartyRng(seed):
        for m in module.modules():
            reset = getattr(m, "reset_parameters", None)
            if callable(reset):
                reset()
