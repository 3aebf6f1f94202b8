"""A party's segments as named tensors: weights, buffers and optimizer state, out and back in.

Theory of operation. What a hand-off or an average moves is a flat dict of tensors with names that mean the same at
every party, whatever its optimizer's internal numbering: ``w/<segment>/<key>`` for a parameter, ``b/<segment>/<key>``
for a buffer (BatchNorm's running statistics and batch count) and ``o/<segment>/<parameter key>/<slot>`` for the
optimizer's state of a parameter (Adam's ``exp_avg``, ``exp_avg_sq`` and ``step``, SGD's ``momentum_buffer``).
Loading writes the values into the receiver's *own* modules and optimizer, so the optimizer stays bound to the
parameters it updates (a hand-off that swaps modules under an optimizer bound to the old ones never trains them).
Names, shapes and dtypes must match the receiver's exactly; anything else is refused before a value is written.

Example:
    >>> import torch
    >>> m = {"bottom": torch.nn.Linear(2, 1)}
    >>> opt = torch.optim.Adam(m["bottom"].parameters())
    >>> sorted(extract(m, opt, optimizer_state=True))
    ['w/bottom/bias', 'w/bottom/weight']
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from vsplit.errors import ProtocolError


def _params(modules: Mapping[str, nn.Module]) -> dict[str, nn.Parameter]:
    return {f"{seg}/{k}": p for seg, m in modules.items() for k, p in m.named_parameters()}


def _buffers(modules: Mapping[str, nn.Module]) -> dict[str, torch.Tensor]:
    return {f"{seg}/{k}": b for seg, m in modules.items() for k, b in m.named_buffers()}


def extract(
    modules: Mapping[str, nn.Module],
    optimizer: torch.optim.Optimizer | None = None,
    *,
    weights: bool = True,
    buffers: bool = True,
    optimizer_state: bool = False,
) -> dict[str, np.ndarray]:
    """The named tensors of ``modules`` (and of ``optimizer``'s state of their parameters), as numpy copies."""
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        if weights:
            out.update({f"w/{k}": p.detach().numpy().copy() for k, p in _params(modules).items()})
        if buffers:
            out.update({f"b/{k}": b.detach().numpy().copy() for k, b in _buffers(modules).items()})
        if optimizer_state and optimizer is not None:
            for key, p in _params(modules).items():
                for slot, value in optimizer.state.get(p, {}).items():
                    if not torch.is_tensor(value):
                        raise ProtocolError(f"optimizer state {key}/{slot} is not a tensor ({type(value).__name__})",
                                            local=True)
                    out[f"o/{key}/{slot}"] = value.detach().numpy().copy()
    return out


def load(
    modules: Mapping[str, nn.Module],
    optimizer: torch.optim.Optimizer | None,
    arrays: Mapping[str, np.ndarray],
    *,
    sender: str = "peer",
) -> None:
    """Write ``arrays`` (as :func:`extract` names them) into ``modules`` and ``optimizer``'s state.

    Parameters and buffers named in ``arrays`` are overwritten, the others kept; when any ``o/`` entry is present,
    the optimizer's state becomes exactly what ``arrays`` holds (a parameter with no entry starts afresh).
    """
    params, bufs = _params(modules), _buffers(modules)
    slots: dict[str, dict[str, np.ndarray]] = {}
    targets: list[tuple[torch.Tensor, np.ndarray]] = []
    for name, value in arrays.items():
        kind, _, key = name.partition("/")
        if kind == "o":
            key, _, slot = key.rpartition("/")
            if key not in params or not slot:
                raise ProtocolError(f"{sender} sent optimizer state {name!r}, which names no parameter here")
            if value.shape not in ((), tuple(params[key].shape)) or value.dtype.kind != "f":
                raise ProtocolError(f"{sender} sent optimizer state {name!r} as {value.dtype}{list(value.shape)}, "
                                    f"the parameter is {list(params[key].shape)}")
            slots.setdefault(key, {})[slot] = value
            continue
        target = params.get(key) if kind == "w" else bufs.get(key) if kind == "b" else None
        if target is None:
            raise ProtocolError(f"{sender} sent {name!r}, which is no parameter or buffer of this party's segments")
        if tuple(value.shape) != tuple(target.shape) or value.dtype != _numpy_dtype(target):
            raise ProtocolError(f"{sender} sent {name!r} as {value.dtype}{list(value.shape)}, this party's is "
                                f"{_numpy_dtype(target)}{list(target.shape)}")
        targets.append((target, value))
    if slots and optimizer is None:
        raise ProtocolError(f"{sender} sent optimizer state to a party without an optimizer", local=True)
    with torch.no_grad():
        for target, value in targets:
            target.copy_(torch.from_numpy(value))
    if slots:
        assert optimizer is not None
        for key, p in params.items():
            given = slots.get(key)
            if given is None:
                optimizer.state.pop(p, None)
                continue
            optimizer.state[p] = {slot: torch.from_numpy(v.copy()) for slot, v in given.items()}


def reset_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """Forget every parameter's optimizer state (Adam's moments and step counts, SGD's momentum)."""
    optimizer.state.clear()


def _numpy_dtype(t: torch.Tensor) -> np.dtype:
    return np.dtype(str(t.dtype).removeprefix("torch."))
