"""The fallback capture: record one real forward pass as a graph of the ATen ops it ran.

Theory of operation. A :class:`~torch.utils._python_dispatch.TorchDispatchMode` sees every ATen op below autograd
with the real tensors; global module hooks keep the stack of module calls, each named by its call path (the name of
the module inside its caller, so one activation object reused by every block is ``blocks.0.act``, ``blocks.1.act``,
never just ``act``). Each op becomes a node whose tensor arguments point at the nodes that produced them (found by
tensor identity; an in-place op makes a new node that later readers use); parameters and buffers become
``get_attr`` nodes and tensors from nowhere become constants. The graph is the path this input took: a
data-dependent branch is recorded as taken, and shapes are those of the example.

Example:
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    >>> captured = record(net, (torch.randn(2, 3),))
    >>> [op.module for op in captured.ops]
    ['0', '0', '1']
"""

from __future__ import annotations

import copy
import operator
import time
from typing import Any

import torch
from torch import fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from vsplit.plan.graph import Captured, Op
from vsplit.plan.measure import measure


class _Calls:
    """The stack of module calls, named by call path."""

    def __init__(self, root: torch.nn.Module) -> None:
        self.root = root
        self.stack: list[tuple[torch.nn.Module, str]] = []
        self.counts: dict[str, int] = {}
        self._names: dict[int, dict[int, str]] = {}
        self._top = {id(m): name for name, m in root.named_modules()}

    def _relative(self, parent: torch.nn.Module, child: torch.nn.Module) -> str | None:
        names = self._names.get(id(parent))
        if names is None:
            names = {}
            for name, module in parent.named_modules():
                names.setdefault(id(module), name)
            self._names[id(parent)] = names
        return names.get(id(child))

    def enter(self, module: torch.nn.Module, *_: Any) -> None:
        if not self.stack:
            if module is not self.root:
                return
            self.stack.append((module, ""))
            return
        parent, parent_path = self.stack[-1]
        base = parent_path.split("@")[0]
        relative = self._relative(parent, module)
        if relative is None:
            path = self._top.get(id(module), f"{base}.<{type(module).__name__}>".lstrip("."))
        else:
            path = f"{base}.{relative}" if base else relative
        count = self.counts.get(path, 0)
        self.counts[path] = count + 1
        self.stack.append((module, path if count == 0 else f"{path}@{count}"))

    def leave(self, module: torch.nn.Module, *_: Any) -> None:
        if self.stack and self.stack[-1][0] is module:
            self.stack.pop()

    def paths(self) -> tuple[str, ...]:
        return tuple(path for _, path in self.stack[1:])


class _Recorder(TorchDispatchMode):
    def __init__(self, root: torch.nn.Module, graph: fx.Graph, calls: _Calls) -> None:
        super().__init__()
        self.graph, self.calls, self.root = graph, calls, root
        self.node_of: dict[int, fx.Node] = {}
        self.keep: list[torch.Tensor] = []  # holds every tensor seen, so no id() is reused during the pass
        self.ops: list[Op] = []
        self._constants = 0
        for name, tensor in [*root.named_parameters(), *root.named_buffers()]:
            self.node_of.setdefault(id(tensor), graph.get_attr(name))
            self.keep.append(tensor)

    def bind(self, tensor: torch.Tensor, node: fx.Node) -> None:
        self.node_of[id(tensor)] = node
        self.keep.append(tensor)

    def _arg(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        node = self.node_of.get(id(value))
        if node is None:  # a tensor made outside the recorded ops: keep its value as a constant of the graph
            name = f"_plan_constant_{self._constants}"
            self._constants += 1
            self.root.register_buffer(name, value.detach().clone(), persistent=False)
            node = self.graph.get_attr(name)
            self.bind(value, node)
        return node

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves(out)):
            return out  # e.g. .item(): the number is baked into later ops, as this input took it
        node = self.graph.call_function(func, *pytree.tree_map(self._arg, (args, kwargs)))
        self.ops.append(Op(index=len(self.ops), node=node, stack=self.calls.paths()))  # dead ones go later
        if isinstance(out, torch.Tensor):
            self.bind(out, node)
        else:
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    self.bind(item, self.graph.call_function(operator.getitem, (node, i)))
        return out


def record(model: torch.nn.Module, example_inputs: tuple) -> Captured:
    """Run ``model`` once on a deep copy and record the graph of what ran (see the module docstring)."""
    start = time.perf_counter()
    root = copy.deepcopy(model)
    flat, in_spec = pytree.tree_flatten((tuple(example_inputs), {}))
    graph = fx.Graph()
    calls = _Calls(root)
    recorder = _Recorder(root, graph, calls)
    for i, leaf in enumerate(flat):
        recorder.bind(leaf, graph.placeholder(f"input_{i}"))
    hooks = [
        torch.nn.modules.module.register_module_forward_pre_hook(calls.enter),
        torch.nn.modules.module.register_module_forward_hook(calls.leave, always_call=True),
    ]
    try:
        with torch.enable_grad(), recorder:
            outputs = root(*example_inputs)
    finally:
        for hook in hooks:
            hook.remove()
    leaves, out_spec = pytree.tree_flatten(outputs)
    del outputs
    graph.output([recorder._arg(leaf) for leaf in leaves])
    graph.eliminate_dead_code()
    module = fx.GraphModule(root, graph)  # same nodes, now runnable
    live = set(graph.nodes)
    ops = [op for op in recorder.ops if op.node in live]
    for i, op in enumerate(ops):
        op.index = i
    del recorder  # drops the references to every tensor of the recorded pass
    return measure("record", module, ops, flat, in_spec=in_spec, out_spec=out_spec, start=start)
