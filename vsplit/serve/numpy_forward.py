"""The bank's small networks as numpy arithmetic: the serving fast path of a forward pass.

Theory of operation. A served micro-batch is a few rows; for them PyTorch's per-module dispatch (hooks, dtype and
device checks, a tensor per step) costs far more than the arithmetic: about half a millisecond for the default
bottom and top, against tens of microseconds in numpy. :func:`compile_forward` turns the modules of a party's
segments into numpy closures when every module is one it knows (:class:`~vsplit.models.tabular.TabularMLP` with
no numeric embedding, the default recipe's piecewise-linear one or a periodic one,
:class:`~vsplit.models.top.TopModel` merging by concat, sum or mean, and ``Sequential``, ``Linear``, ``ReLU``,
``Dropout``, ``Identity`` inside them); for any other module (a module of your own) it returns ``None`` and
serving keeps the PyTorch forward. The weights are copied once, in float32 as PyTorch holds them, and the
arithmetic is the same (only the order of a matrix product's sums may differ), so the scores equal batch
prediction's within float32 rounding: ``tests/test_serving.py`` checks at most 1e-6 apart.

Example:
    >>> import torch
    >>> from vsplit.models.tabular import TabularMLP
    >>> torch.manual_seed(0) and None
    >>> bottom = TabularMLP(cardinalities=[3, 5], n_numeric=2, out_dim=4).eval()
    >>> run = module_function(bottom)
    >>> cat, num = torch.tensor([[1, 4], [2, 0]]), torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    >>> bool(np.allclose(run(cat.numpy(), num.numpy()), bottom(cat, num).detach().numpy(), atol=1e-6))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np


class Unsupported(Exception):
    """A module this fast path does not know (serving then runs PyTorch's forward)."""


def compile_forward(topology: Any, me: str, modules: Mapping[str, Any]) -> Callable[..., np.ndarray] | None:
    """``run(inputs, received)``: ``me``'s segments of ``topology`` in order, as :func:`vsplit.serve.model.forward`
    runs them, on numpy ``inputs`` (its own rows' arrays) and ``received`` (segment name -> array); ``None`` if a
    module is not supported."""
    steps = []
    try:
        for seg in topology.segments:
            if seg.owner == me:
                steps.append((seg.name, seg.is_source, tuple(seg.inputs), module_function(modules[seg.name])))
    except Unsupported:
        return None
    loss = topology.loss_segment.name

    def run(inputs: Any, received: Mapping[str, np.ndarray]) -> np.ndarray:
        ctx: dict[str, Any] = dict(received)
        for name, source, needs, function in steps:
            if source:
                ctx[name] = function(*inputs)
            elif len(needs) == 1:
                ctx[name] = function(ctx[needs[0]])
            else:
                ctx[name] = function({i: ctx[i] for i in needs})
        return ctx[loss]

    return run


def module_function(module: Any) -> Callable[..., np.ndarray]:
    """A numpy function computing ``module``'s forward (in eval mode); :class:`Unsupported` if it cannot."""
    from torch import nn

    from vsplit.models.merge import Concat, Mean, Sum
    from vsplit.models.tabular import TabularMLP
    from vsplit.models.top import TopModel

    kind = type(module)
    if kind is nn.Sequential:
        parts = [module_function(m) for m in module]

        def sequence(x: np.ndarray) -> np.ndarray:
            for part in parts:
                x = part(x)
            return x

        return sequence
    if kind is nn.Linear:
        weight = _array(module.weight).T.copy()
        bias = _array(module.bias) if module.bias is not None else None
        return (lambda x: x @ weight + bias) if bias is not None else (lambda x: x @ weight)
    if kind is nn.ReLU:
        return lambda x: np.maximum(x, np.float32(0))
    if kind in (nn.Dropout, nn.Identity):
        return lambda x: x
    if kind is TabularMLP:
        tables = [_array(e.weight) for e in module.embeddings]
        mlp = module_function(module.mlp)
        numeric = (lambda x: x) if module.numeric is None else _numeric_function(module.numeric)

        def tabular(cat: np.ndarray, num: np.ndarray) -> np.ndarray:
            parts = [table[cat[:, i]] for i, table in enumerate(tables)]
            if num.shape[1]:
                parts.append(numeric(num))
            return mlp(np.concatenate(parts, axis=1))

        return tabular
    if kind is TopModel and type(module.merge) in (Concat, Sum, Mean):
        merge = {Concat: lambda p: np.concatenate(p, axis=1), Sum: lambda p: np.sum(p, axis=0, dtype=np.float32),
                 Mean: lambda p: np.mean(p, axis=0, dtype=np.float32)}[type(module.merge)]
        head, parties, squeeze = module_function(module.head), list(module.parties), module.out_dim == 1

        def top(embeddings: Any) -> np.ndarray:
            if not isinstance(embeddings, Mapping):
                embeddings = {parties[0]: embeddings}
            out = head(merge([embeddings[name] for name in parties]))
            return out[:, 0] if squeeze else out

        return top
    raise Unsupported(kind.__name__)


def _numeric_function(module: Any) -> Callable[[np.ndarray], np.ndarray]:
    """A :class:`~vsplit.models.numeric.NumericEmbedding` whose layer is rtdl's piecewise-linear embedding (version B,
    no activation: the recipe's) or its periodic one (what a bag's even networks use) as numpy;
    :class:`Unsupported` for any other."""
    import rtdl_num_embeddings as rtdl

    layer = module.layer
    binned, passed = module.binned.cpu().numpy(), module.passed.cpu().numpy()
    if type(layer) is rtdl.PeriodicEmbeddings:
        return _flattened(_periodic_function(layer), binned, passed)
    if type(layer) is not rtdl.PiecewiseLinearEmbeddings or layer.activation is not None or layer.linear0 is None:
        raise Unsupported(f"numeric embedding {type(layer).__name__}")
    w0, b0 = _array(layer.linear0.weight), _array(layer.linear0.bias)  # (F, d): linear0(x) = b0 + w0 * x
    impl = layer.impl
    w, b = _array(impl.weight), _array(impl.bias)  # (F, B): the encoding before its clamps
    single = None if impl.single_bin_mask is None else impl.single_bin_mask.cpu().numpy()[:, None]
    lw = _array(layer.linear.weight)  # (F, B, d)
    lb = None if layer.linear.bias is None else _array(layer.linear.bias)

    def encode(x: np.ndarray) -> np.ndarray:
        e = b + w * x[..., None]  # (n, F, B)
        if e.shape[-1] > 1:  # as rtdl clamps: first <= 1, middle in [0, 1], last >= 0 (a one-bin feature unclamped)
            last = np.maximum(e[..., -1:], np.float32(0))
            if single is not None:
                last = np.where(single, e[..., -1:], last)
            e = np.concatenate([np.minimum(e[..., :1], np.float32(1)), np.clip(e[..., 1:-1], 0, 1), last], axis=-1)
        return e

    def embed(x: np.ndarray) -> np.ndarray:
        out = (b0 + w0 * x[..., None]) + np.einsum("nfb,fbd->nfd", encode(x), lw)
        return out if lb is None else out + lb

    return _flattened(embed, binned, passed)


def _periodic_function(layer: Any) -> Callable[[np.ndarray], np.ndarray]:
    """rtdl's ``PeriodicEmbeddings`` as numpy, ``(n, F) -> (n, F, d)``: ``cos`` and ``sin`` of learned frequencies
    times the value, a linear map per feature (one shared one if ``lite``), then ReLU unless switched off."""
    scaled = np.float32(2 * np.pi) * _array(layer.periodic.weight)  # (F, k), as torch computes 2 * pi * weight
    shared = layer.linear.weight.ndim == 2  # lite: one nn.Linear for every feature
    w = _array(layer.linear.weight)  # (F, 2k, d), or (d, 2k) shared
    b = None if layer.linear.bias is None else _array(layer.linear.bias)
    relu = layer.activation is not None

    def embed(x: np.ndarray) -> np.ndarray:
        z = scaled * x[..., None]
        e = np.concatenate([np.cos(z), np.sin(z)], axis=-1)  # (n, F, 2k)
        out = e @ w.T if shared else np.einsum("nfi,fio->nfo", e, w)
        if b is not None:
            out = out + b
        return np.maximum(out, np.float32(0)) if relu else out

    return embed


def _flattened(embed: Callable[[np.ndarray], np.ndarray], binned: np.ndarray, passed: np.ndarray
               ) -> Callable[[np.ndarray], np.ndarray]:
    """``embed`` of the ``binned`` columns flattened, then the ``passed`` columns as they are (NumericEmbedding)."""

    def run(num: np.ndarray) -> np.ndarray:
        parts = [embed(num[:, binned]).reshape(len(num), -1)] if len(binned) else []
        if len(passed):
            parts.append(num[:, passed])
        return np.concatenate(parts, axis=1)

    return run


def _array(parameter: Any) -> np.ndarray:
    return np.ascontiguousarray(parameter.detach().cpu().numpy(), dtype=np.float32)
