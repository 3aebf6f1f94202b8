"""The captured dataflow graph of one forward pass, whichever way it was obtained.

Theory of operation. Both capture methods (:mod:`vsplit.plan.export` and :mod:`vsplit.plan.record`) end with the
same thing: a flat :class:`torch.fx.Graph` of ATen ops in execution order, the module that owns its parameters and
buffers (a deep copy of the user's model), the pytree specs of the inputs and outputs, and per op the call path of
the module it ran in (``blocks.0.act@1`` is the second call of that module), its forward FLOPs, and the storages
autograd saved for backward while it ran. Everything the planner reports is computed from this record.

Example:
    >>> module_path("L__self__blocks.0.act@1", "blocks.0.act")
    'blocks.0.act@1'
    >>> module_path("L__self__head", "head")
    'head'
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

_CALL_SUFFIX = re.compile(r"@\d+$")


def module_path(key: str, path: str) -> str:
    """The call path of an ``nn_module_stack`` entry: the module path, plus ``@k`` for its k-th repeated call."""
    match = _CALL_SUFFIX.search(key)
    return path + (match.group(0) if match else "")


@dataclass(eq=False)
class Op:
    """One op of the forward pass (a tuple-returning op and the items taken from it count as one)."""

    index: int
    node: fx.Node
    stack: tuple[str, ...]  # call paths of the enclosing modules, outermost first, the root excluded
    flops: int = 0
    saved: dict[int, int] = field(default_factory=dict)  # storage key -> bytes autograd saved for backward

    @property
    def module(self) -> str:
        return self.stack[-1] if self.stack else ""


@dataclass
class Captured:
    """A forward pass as a graph: what :func:`vsplit.plan.plan_cuts` analyses and :func:`split` cuts."""

    method: str  # "export" or "record"
    root: torch.nn.Module  # owns the parameters and buffers the graph's get_attr nodes name
    graph: fx.Graph
    in_spec: Any
    out_spec: Any
    ops: list[Op]
    values: dict[fx.Node, torch.Tensor]  # every tensor the pass produced (and the inputs), by node
    requires_grad: dict[fx.Node, bool]
    batch: int
    seconds: float
    note: str = ""

    def op_of(self) -> dict[fx.Node, int]:
        """The op index of every op node (items of a tuple belong to the op that made the tuple)."""
        index = {op.node: op.index for op in self.ops}
        for node in self.graph.nodes:
            if node.op == "call_function" and node.target is operator.getitem and node.args[0] in index:
                index[node] = index[node.args[0]]
        return index

    def inputs(self) -> list[fx.Node]:
        return [n for n in self.graph.nodes if n.op == "placeholder"]

    def output(self) -> fx.Node:
        return next(n for n in self.graph.nodes if n.op == "output")


def is_op(node: fx.Node) -> bool:
    """Whether a node is an op of the forward pass (not an input, a parameter, an item of a tuple or a guard)."""
    if node.op == "call_module":
        return node.target != "_guards_fn"
    return node.op == "call_function" and node.target is not operator.getitem
