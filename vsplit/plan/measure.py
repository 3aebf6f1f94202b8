"""Per-op forward FLOPs and saved-for-backward storages, measured while one forward pass runs.

FLOPs use the formulas of :mod:`torch.utils.flop_counter` (2 FLOPs per multiply-add, the same numbers
``FlopCounterMode`` prints); saved storages are what ``torch.autograd.graph.saved_tensors_hooks`` sees, keyed by
storage so a tensor saved by several ops counts once. Parameters and buffers are not activations and are left out.

Example:
    >>> import torch
    >>> meter = Meter(skip=set())
    >>> with meter.counting():
    ...     meter.current = "mm"
    ...     _ = torch.ones(2, 3) @ torch.ones(3, 4)
    >>> meter.flops["mm"]
    48
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Hashable, Iterator
from typing import Any

import torch
from torch import fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry


def storage_key(tensor: torch.Tensor) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def op_flops(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    """FLOPs of one ATen call, by the formulas of :mod:`torch.utils.flop_counter` (0 for ops it has none for)."""
    formula = flop_registry.get(getattr(func, "_overloadpacket", None))
    return int(formula(*args, **kwargs, out_val=out)) if formula is not None else 0


class _Count(TorchDispatchMode):
    def __init__(self, meter: Meter) -> None:
        super().__init__()
        self.meter = meter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.meter.flops[self.meter.current] += op_flops(func, args, kwargs, out)
        return out


class Meter:
    """Adds FLOPs and saved storages to whatever op ``current`` names while :meth:`counting` or :meth:`saving`."""

    def __init__(self, *, skip: set[tuple[int, int]]) -> None:
        self.current: Hashable = None
        self.flops: dict[Hashable, int] = defaultdict(int)
        self.saved: dict[Hashable, dict[tuple[int, int], int]] = defaultdict(dict)
        self._skip = skip  # storages of parameters and buffers

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        key = storage_key(tensor)
        if key not in self._skip and key[0]:
            self.saved[self.current][key] = key[1]
        return tensor

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
            yield

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        with _Count(self):
            yield


class _Run(fx.Interpreter):
    def __init__(self, module: fx.GraphModule, meter: Meter, ops: dict[fx.Node, Any]) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.meter, self.op_by_node = meter, ops

    def run_node(self, n: fx.Node) -> Any:
        self.meter.current = self.op_by_node.get(n)
        return super().run_node(n)


def measured_run(module: fx.GraphModule, ops: list, flat_inputs: list) -> tuple[Any, dict[fx.Node, Any]]:
    """Run a graph once with autograd on, filling each op's ``flops`` and ``saved``; the outputs and every value.

    Running the graph node by node (rather than the model) ties every FLOP and every saved tensor to the node that
    caused it, whichever way the graph was captured.
    """
    meter = Meter(skip=parameter_storages(module))
    run = _Run(module, meter, {op.node: op for op in ops})
    with torch.enable_grad(), meter.saving(), meter.counting():
        outputs = run.run(*flat_inputs)
    for op in ops:
        op.flops, op.saved = meter.flops.get(op, 0), meter.saved.get(op, {})
    return outputs, run.env


def measure(
    method: str, module: fx.GraphModule, ops: list, flat: list, *, in_spec: Any, out_spec: Any, start: float
) -> Any:
    """The :class:`~vsplit.plan.graph.Captured` of a graph after one :func:`measured_run` on the flat inputs.

    ``out_spec`` None: take the output structure from the run (graphs whose code rebuilds it, as exported ones).
    """
    from vsplit.plan.graph import Captured

    outputs, env = measured_run(module, ops, flat)
    values = {n: v for n, v in env.items() if isinstance(v, torch.Tensor) and n.op != "get_attr"}
    tensors = [t for t in flat if isinstance(t, torch.Tensor) and t.dim()]
    return Captured(
        method=method, root=module, graph=module.graph, in_spec=in_spec,
        out_spec=pytree.tree_flatten(outputs)[1] if out_spec is None else out_spec, ops=ops, values=values,
        requires_grad={n: bool(v.requires_grad) for n, v in values.items()},
        batch=int(tensors[0].shape[0]) if tensors else 1, seconds=time.perf_counter() - start,
    )


def parameter_storages(module: torch.nn.Module) -> set[tuple[int, int]]:
    """The storages of a module's parameters and buffers."""
    return {storage_key(t) for t in [*module.parameters(), *module.buffers()]}
