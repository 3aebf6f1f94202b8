"""Carry out a cut: two graph modules, the client returning the crossing tensors, the server taking only those.

The client half runs the ops before the cut on the model's (flattened) inputs and returns the crossing tensors as
one tuple; the server half takes that tuple and returns the model's output in its original structure (tensor,
tuple or dict). Both are plain :class:`torch.fx.GraphModule` s, so ``.parameters()``, ``.train()`` and
``state_dict()`` work and the topology engine can use them as segments. They hold the planner's copy of the
parameters, named as in the model. A crossing tensor the server changes in place is cloned first, so the server
also accepts leaf tensors that require grad (as a receiving party has). Halves of an exported graph take any batch
size when the batch dimension exported as dynamic; a recorded graph keeps the example's shapes.

Example:
    >>> import torch
    >>> from vsplit.plan import plan_cuts
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)).eval()
    >>> x = torch.randn(2, 3)
    >>> client, server = plan_cuts(net, (x,)).split("1")
    >>> crossing = client(x)
    >>> [tuple(t.shape) for t in crossing], torch.equal(server(crossing), net(x))
    ([(2, 4)], True)
"""

from __future__ import annotations

import operator

import torch
from torch import fx
from torch.utils import _pytree as pytree

from vsplit.errors import ConfigError
from vsplit.plan.graph import Captured


def _writes_first_argument(node: fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.arguments:
        return False
    alias = schema.arguments[0].alias_info
    return alias is not None and alias.is_write


def _copy(graph: fx.Graph, node: fx.Node, env: dict[fx.Node, fx.Node], crossing: list[fx.Node] = ()) -> None:
    def lookup(arg: fx.Node) -> fx.Node:
        if arg not in env and arg.op == "get_attr":
            env[arg] = graph.get_attr(arg.target)
        if arg not in env:
            env[arg] = _size_from_crossing(graph, arg, env, crossing)
        return env[arg]

    env[node] = graph.node_copy(node, lookup)


def _size_from_crossing(graph: fx.Graph, needed: fx.Node, env: dict, crossing: list[fx.Node]) -> fx.Node:
    """A size the client computed (a dynamic batch, say) read again from a crossing tensor of the same size."""
    value = needed.meta.get("val")
    if isinstance(value, torch.SymInt):
        for node in crossing:
            meta = node.meta.get("val")
            for dim, size in enumerate(getattr(meta, "shape", ())):
                if isinstance(size, torch.SymInt) and size.node.expr == value.node.expr:
                    return graph.call_function(torch.ops.aten.sym_size.int, (env[node], dim))
    raise ConfigError(
        f"the server half needs {needed.name!r} ({needed.target}) from before the cut, which is not a tensor and "
        "not the size of one that crosses; cut elsewhere, or plan with method='record'"
    )


def _body(captured: Captured, position: int, *, client: bool) -> list[fx.Node]:
    op_of = captured.op_of()
    return [n for n in captured.graph.nodes if n in op_of and (op_of[n] < position) == client]


def split_graph(captured: Captured, position: int, crossing: list[fx.Node]) -> tuple[fx.GraphModule, fx.GraphModule]:
    """The client and server halves of the cut before op ``position`` (``crossing``: the values that cross it)."""
    front = fx.Graph()
    env: dict[fx.Node, fx.Node] = {n: front.placeholder(n.name) for n in captured.inputs()}
    for node in _body(captured, position, client=True):
        _copy(front, node, env)
    front.output(tuple(env[n] for n in crossing))

    back = fx.Graph()
    received = back.placeholder("crossing")
    env = {}
    suffix = _body(captured, position, client=False)
    written = {n.args[0] for n in suffix if _writes_first_argument(n)}
    for i, node in enumerate(crossing):
        env[node] = back.call_function(operator.getitem, (received, i))
        if node in written:
            env[node] = back.call_function(torch.ops.aten.clone.default, (env[node],))
    for node in suffix:
        _copy(back, node, env, crossing)
    leaves = pytree.tree_map_only(fx.Node, lambda n: _lookup_output(back, n, env), list(_output_leaves(captured)))
    back.output(pytree.tree_unflatten(leaves, captured.out_spec))
    return _module(captured.root, front, "PlanClient"), _module(captured.root, back, "PlanServer")


def _output_leaves(captured: Captured) -> list:
    return pytree.tree_leaves(captured.output().args[0])


def _lookup_output(graph: fx.Graph, node: fx.Node, env: dict[fx.Node, fx.Node]) -> fx.Node:
    if node not in env and node.op == "get_attr":  # the model returns a parameter or buffer as it is
        env[node] = graph.get_attr(node.target)
    return env[node]


def _module(root: torch.nn.Module, graph: fx.Graph, name: str) -> fx.GraphModule:
    graph.lint()
    return fx.GraphModule(root, graph, class_name=name)
