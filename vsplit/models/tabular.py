"""The default bottom model: an MLP over categorical embeddings and numeric columns.

A bottom model is any ``torch.nn.Module`` called as ``model(cat, num)`` with ``cat`` a ``LongTensor`` of category
codes ``(batch, n_categorical)`` (0 = unknown) and ``num`` a ``FloatTensor`` ``(batch, n_numeric)``, returning the
party's embedding ``(batch, out_dim)``. Bring your own module with that signature to replace this one.

Example:
    >>> import torch
    >>> model = TabularMLP(cardinalities=[3, 5], n_numeric=2, out_dim=8)
    >>> model(torch.zeros(4, 2, dtype=torch.long), torch.zeros(4, 2)).shape
    torch.Size([4, 8])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def embedding_width(cardinality: int) -> int:
    """A rule of thumb for the width of a categorical embedding: grows slowly with the number of categories."""
    return int(min(16, max(2, round(1.6 * cardinality**0.56))))


class TabularMLP(nn.Module):
    """Categorical embeddings concatenated with numeric columns, then an MLP.

    Args:
        cardinalities: number of codes of each categorical column, including the 0 "unknown" code.
        n_numeric: number of numeric columns.
        hidden: widths of the hidden layers.
        out_dim: width of the embedding the party sends.
        dropout: dropout after each hidden layer.
        numeric: a module mapping the numeric columns ``(n, n_numeric)`` to ``(n, numeric.out_width)`` before the
            MLP (a fitted :class:`~vsplit.models.numeric.NumericEmbedding`); default: the columns as they are.
    """

    def __init__(
        self,
        *,
        cardinalities: Sequence[int],
        n_numeric: int,
        hidden: Sequence[int] = (64,),
        out_dim: int = 16,
        dropout: float = 0.0,
        numeric: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(c, embedding_width(c)) for c in cardinalities)
        self.numeric = numeric
        n_numeric_out = numeric.out_width if numeric is not None and n_numeric else n_numeric
        width = sum(e.embedding_dim for e in self.embeddings) + n_numeric_out
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU()]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = size
        layers.append(nn.Linear(width, out_dim))
        self.mlp = nn.Sequential(*layers)
        self.out_dim = out_dim

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        parts = [emb(cat[:, i]) for i, emb in enumerate(self.embeddings)]
        if num.shape[1]:
            parts.append(self.numeric(num) if self.numeric is not None else num)
        return self.mlp(torch.cat(parts, dim=1))
