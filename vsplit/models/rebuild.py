"""The shape of a default bottom as plain data, to build it again without the rows it was fitted on.

A default bottom (:class:`~vsplit.models.tabular.TabularMLP`) takes its shape from its party's rows: the categories
of each column, and for a numeric embedding which columns are binned and into how many bins
(:mod:`vsplit.models.numeric`). :func:`bottom_spec` reads that shape off a fitted module as JSON-able data;
:func:`build_bottom` builds a module of the same shape (its weights and bin edges placeholders), into which the saved
``state_dict`` is then loaded: every fitted number, bin edges included, is in the ``state_dict``.

Example:
    >>> import torch
    >>> from vsplit.models.numeric import numeric_embedding
    >>> num = torch.randn(50, 3)
    >>> module = TabularMLP(cardinalities=[3], n_numeric=3, hidden=(8,), out_dim=4,
    ...                     numeric=numeric_embedding("piecewise", num, width=2, n_bins=4))
    >>> again = build_bottom(bottom_spec(module))
    >>> _ = again.load_state_dict(module.state_dict())
    >>> x = (torch.zeros(5, 1, dtype=torch.int64), torch.randn(5, 3))
    >>> bool(torch.equal(again.eval()(*x), module.eval()(*x)))
    True
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vsplit.models.numeric import NumericEmbedding
from vsplit.models.tabular import TabularMLP


def bottom_spec(module: nn.Module) -> dict[str, Any] | None:
    """The shape of a default bottom, as JSON-able data; ``None`` for any other module (one of your own)."""
    if type(module) is not TabularMLP:
        return None
    linears = [m for m in module.mlp if isinstance(m, nn.Linear)]
    spec: dict[str, Any] = {
        "cardinalities": [e.num_embeddings for e in module.embeddings],
        "hidden": [m.out_features for m in linears[:-1]],
        "out_dim": module.out_dim,
        "dropout": next((m.p for m in module.mlp if isinstance(m, nn.Dropout)), 0.0),
        "numeric": None,
    }
    numeric = module.numeric
    n_numeric_in = linears[0].in_features - sum(e.embedding_dim for e in module.embeddings)
    if numeric is None:
        spec["n_numeric"] = n_numeric_in
        return spec
    if type(numeric) is not NumericEmbedding:
        return None
    binned, passed = numeric.binned.tolist(), numeric.passed.tolist()
    spec["n_numeric"] = len(binned) + len(passed)
    layer = numeric.layer
    width = (numeric.out_width - len(passed)) // max(len(binned), 1)
    if hasattr(layer, "impl"):  # piecewise linear: the number of bins of each binned column
        impl = layer.impl
        mask = getattr(impl, "mask", None)
        bins = [int(impl.weight.shape[1])] * len(binned) if mask is None else mask.sum(dim=1).tolist()
        spec["numeric"] = {"kind": "piecewise", "binned": binned, "passed": passed, "width": width, "bins": bins}
    else:
        spec["numeric"] = {"kind": "periodic", "binned": binned, "passed": passed, "width": width}
    return spec


def build_bottom(spec: dict[str, Any]) -> TabularMLP:
    """A default bottom of the shape :func:`bottom_spec` read (placeholder weights: load the saved ``state_dict``)."""
    import warnings

    import rtdl_num_embeddings as rtdl

    numeric = None
    emb = spec.get("numeric")
    if emb is not None:
        binned, passed, width = list(emb["binned"]), list(emb["passed"]), int(emb["width"])
        if emb["kind"] == "piecewise":
            edges = [torch.linspace(0.0, 1.0, int(n) + 1) for n in emb["bins"]]  # placeholders of the right count
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                layer = rtdl.PiecewiseLinearEmbeddings(edges, width, activation=False, version="B")
        else:
            layer = rtdl.PeriodicEmbeddings(len(binned), width, lite=False)
        numeric = NumericEmbedding(layer, binned=binned, passed=passed, width=width)
    return TabularMLP(cardinalities=[int(c) for c in spec["cardinalities"]], n_numeric=int(spec["n_numeric"]),
                      hidden=tuple(int(h) for h in spec["hidden"]), out_dim=int(spec["out_dim"]),
                      dropout=float(spec["dropout"]), numeric=numeric)
