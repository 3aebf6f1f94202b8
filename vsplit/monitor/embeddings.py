"""A party's own embedding of rows: the output of its source segment, one column per dimension (no gradients).

A partner's embedding dimensions are what the label party's top reads of it; their stability shows a shift in the
partner's population without the partner showing its columns. Each party computes its own.

Example:
    >>> import torch
    >>> from vsplit.models.tabular import TabularMLP
    >>> model = TabularMLP(cardinalities=[], n_numeric=2, out_dim=3)
    >>> embedding_frame(model, (torch.zeros(4, 0, dtype=torch.long), torch.zeros(4, 2))).columns.tolist()
    ['embedding[0]', 'embedding[1]', 'embedding[2]']
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from torch import nn


def embedding_frame(module: nn.Module, inputs: Sequence[torch.Tensor], *, chunk: int = 8192) -> pd.DataFrame:
    """``module(*inputs)`` in eval mode, chunk by chunk, as a DataFrame with columns ``embedding[i]``."""
    was = module.training
    module.eval()
    try:
        with torch.no_grad():
            parts = [module(*(t[i:i + chunk] for t in inputs)) for i in range(0, len(inputs[0]), chunk)]
    finally:
        module.train(was)
    values = torch.cat(parts).reshape(len(inputs[0]), -1).double().numpy() if parts else None
    width = values.shape[1] if values is not None else 0
    return pd.DataFrame(values, columns=[f"embedding[{i}]" for i in range(width)])
