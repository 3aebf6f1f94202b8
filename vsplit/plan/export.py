"""The first-choice capture: ``torch.export`` on a deep copy, then one measured run of the exported graph.

The batch dimension is exported as dynamic when the model allows it (else every shape is fixed), so the halves of a
cut accept any batch size. Export can leave fake tensors behind in buffers the model assigns during tracing, so it
never sees the user's object. The exported program is unlifted to a graph module (parameters as ``get_attr``), its
ops are named by the call paths of export's ``nn_module_stack``, and one run of the graph with real tensors
(:func:`~vsplit.plan.measure.measured_run`) measures each op's FLOPs and saved storages and keeps its values.

Example:
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    >>> captured = export_graph(net, (torch.randn(2, 3),))
    >>> [(op.module, op.flops) for op in captured.ops]
    [('0', 48), ('1', 0)]
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import time
from collections.abc import Iterator

import torch
from torch import fx
from torch.utils import _pytree as pytree

from vsplit.plan.graph import Captured, Op, is_op, module_path
from vsplit.plan.measure import measure


@contextlib.contextmanager
def quiet_torch() -> Iterator[None]:
    """Silence torch's own warnings and the graph it prints when export refuses: the planner says so in one line."""
    loggers = [logger for name, logger in logging.root.manager.loggerDict.items()
               if name.startswith("torch") and isinstance(logger, logging.Logger)]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _dynamic_batch(inputs: tuple) -> tuple:
    return tuple({0: torch.export.Dim.AUTO} if isinstance(t, torch.Tensor) and t.dim() else None for t in inputs)


def _stack(node: fx.Node) -> tuple[str, ...]:
    stack = node.meta.get("nn_module_stack") or {}
    # export marks ops it adds itself (reading a dynamic size, say) with a placeholder entry: they belong to no module
    return tuple(module_path(key, path) for key, (path, _) in stack.items()
                 if path and not path.startswith("_empty_nn_module_stack"))


def export_graph(model: torch.nn.Module, example_inputs: tuple) -> Captured:
    """Capture ``model`` with ``torch.export`` (non-strict); raises whatever export raises when it refuses."""
    start = time.perf_counter()
    inputs = tuple(example_inputs)
    with quiet_torch():
        try:  # a dynamic batch dimension, so the halves of a cut take any batch size
            program = torch.export.export(copy.deepcopy(model), inputs, dynamic_shapes=_dynamic_batch(inputs))
        except Exception:  # some models only export with every shape fixed
            program = torch.export.export(copy.deepcopy(model), inputs)
    module = program.module()
    graph = module.graph
    ops = [Op(index=i, node=n, stack=_stack(n)) for i, n in enumerate(n for n in graph.nodes if is_op(n))]
    flat, in_spec = pytree.tree_flatten((tuple(example_inputs), {}))
    return measure("export", module, ops, flat, in_spec=in_spec, out_spec=None, start=start)
