"""The top model at the label party: merge the parties' embeddings, then an MLP to ``out_dim`` outputs.

Example:
    >>> import torch
    >>> top = TopModel(widths={"bank": 8, "partner": 8}, merge="concat", hidden=(16,))
    >>> top({"bank": torch.zeros(4, 8), "partner": torch.zeros(4, 8)}).shape
    torch.Size([4])
    >>> top = TopModel(widths={"bank": 8, "partner": 4}, merge="attention", out_dim=10)
    >>> top({"bank": torch.zeros(4, 8), "partner": torch.zeros(4, 4)}).shape
    torch.Size([4, 10])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.models.merge import MERGES


class TopModel(nn.Module):
    """Merges embeddings in a fixed party order and maps them to ``out_dim`` outputs (logits or values).

    Args:
        widths: embedding width of each party, in the order the merge sees them.
        merge: ``"concat"``, ``"sum"``, ``"mean"`` or ``"attention"`` (see :mod:`vsplit.models.merge`).
        hidden: widths of the hidden layers after the merge.
        dropout: dropout after each hidden layer.
        out_dim: width of the output; 1 returns shape ``(n,)`` (a binary logit or a regression value), more
            returns ``(n, out_dim)`` (e.g. multiclass logits; see ``Task.output_width``).
    """

    def __init__(
        self,
        *,
        widths: Mapping[str, int],
        merge: str = "concat",
        hidden: Sequence[int] = (32,),
        dropout: float = 0.0,
        out_dim: int = 1,
    ) -> None:
        super().__init__()
        self.parties = list(widths)
        if out_dim < 1:
            raise ConfigError(f"TopModel out_dim must be at least 1, got {out_dim}")
        self.out_dim = out_dim
        self.merge = MERGES.get(merge)(list(widths.values()))
        width = self.merge.output_width(list(widths.values()))
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [nn.ReLU(), nn.Linear(width, size)]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = size
        layers += [nn.ReLU(), nn.Linear(width, out_dim)]
        self.head = nn.Sequential(*layers)

    def forward(self, embeddings: Mapping[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
        if isinstance(embeddings, torch.Tensor):  # one input: the engine passes the tensor itself
            embeddings = {self.parties[0]: embeddings}
        merged = self.merge([embeddings[name] for name in self.parties])
        out = self.head(merged)
        return out.squeeze(1) if self.out_dim == 1 else out
