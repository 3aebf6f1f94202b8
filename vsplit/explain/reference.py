"""The reference the split explanation is checked against: Captum's integrated gradients on the same network
assembled in one place (``pip install 'vsplit[explain]'``).

Captum cannot drive an exchange between organizations (its attribution methods call one forward function), which is
why :mod:`vsplit.explain.machine` computes integrated gradients itself, each party on its own segment; here Captum
runs on the whole network in one process, with the same baselines and the same Gauss-Legendre nodes, so the two must
agree up to float rounding. Categorical columns go through their embeddings as in :mod:`vsplit.explain.paths`
(Captum's inputs are then the embedding outputs, fed to the model by forward hooks).

Example:
    >>> import torch
    >>> from vsplit.models.tabular import TabularMLP
    >>> from vsplit.explain.paths import Baseline
    >>> bottom = TabularMLP(cardinalities=[3], n_numeric=2, out_dim=4)
    >>> top = torch.nn.Linear(4, 1)
    >>> inputs = (torch.tensor([[1], [2]]), torch.tensor([[0.5, -1.0], [1.0, 0.0]]))
    >>> out = captum_attributions({"bank": (bottom, inputs, Baseline.fit(bottom, inputs))},
    ...                           lambda e: top(e["bank"]), steps=16)
    >>> out["bank"].shape  # (rows, 1 categorical + 2 numeric)
    (2, 3)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.explain.paths import Baseline, embedding_layers


def captum_attributions(
    bottoms: Mapping[str, tuple[nn.Module, Sequence[torch.Tensor], Baseline]],
    top: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    *,
    steps: int = 32,
) -> dict[str, np.ndarray]:
    """Per-row attributions ``(n, n_categorical + n_numeric)`` of each bottom's inputs (``bottom -> (module,
    (cat, num), baseline)``) to ``top({bottom: embedding})`` (one score per row), by Captum's integrated gradients."""
    try:
        from captum.attr import IntegratedGradients
    except ImportError as error:  # pragma: no cover - the dev extra installs it
        raise ConfigError("the Captum reference needs Captum: pip install 'vsplit[explain]'") from error
    names = list(bottoms)
    layout: list[tuple[str, str, int]] = []  # (bottom, "cat"/"num", index)
    inputs: list[torch.Tensor] = []
    baselines: list[torch.Tensor] = []
    for name in names:
        module, (cat, num), base = bottoms[name]
        layers = embedding_layers(module, cat.shape[1]) if base.cat is not None else None
        with torch.no_grad():
            for i, layer in enumerate(layers or []):
                inputs.append(layer(cat[:, i]).detach())
                assert base.cat is not None
                baselines.append(base.cat[i].expand_as(inputs[-1]).contiguous())
                layout.append((name, "cat", i))
        inputs.append(num.float())
        baselines.append(base.num.expand_as(num).contiguous())
        layout.append((name, "num", 0))

    def forward(*tensors: torch.Tensor) -> torch.Tensor:
        embeddings = {}
        for name in names:
            module, (cat, _), _ = bottoms[name]
            given = {i: t for (b, kind, i), t in zip(layout, tensors, strict=True) if b == name and kind == "cat"}
            num = next(t for (b, kind, _), t in zip(layout, tensors, strict=True) if b == name and kind == "num")
            layers = embedding_layers(module, cat.shape[1]) if given else None
            handles = [layer.register_forward_hook(_replace(given[i])) for i, layer in enumerate(layers or [])]
            try:
                repeat = len(num) // len(cat) if len(cat) else 1
                embeddings[name] = module(cat.repeat(repeat, 1), num)
            finally:
                for handle in handles:
                    handle.remove()
        out = top(embeddings)
        return out.reshape(len(out), -1)[:, 0]

    attributions = IntegratedGradients(forward).attribute(
        tuple(inputs), baselines=tuple(baselines), n_steps=steps, method="gausslegendre",
        internal_batch_size=None)
    out: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for (name, kind, _), values in zip(layout, attributions, strict=True):
        v = values.detach().double().numpy()
        out[name].append(v.sum(axis=1, keepdims=True) if kind == "cat" else v)
    return {n: np.concatenate(parts, axis=1) for n, parts in out.items()}


def _replace(value: torch.Tensor) -> Any:
    def hook(_module: nn.Module, _inputs: tuple, _out: torch.Tensor) -> torch.Tensor:
        return value

    return hook
