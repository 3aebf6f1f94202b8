"""An ensemble top: ``members`` heads over the one merged embedding, their outputs averaged.

The partners' bottoms and the cut are shared by every member: each partner sends one embedding per row and gets
one gradient back, as with a single head, so the ensemble adds no bytes to the cut (the heads live at the label
party only). Each member is a head of its own, initialised from its own draw of the label party's seed; the model's
output is the mean of the members' outputs (logits or values), trained as one module.

Example:
    >>> import torch
    >>> top = EnsembleTop(widths={"bank": 8, "partner": 8}, members=3, hidden=(16,))
    >>> top({"bank": torch.zeros(4, 8), "partner": torch.zeros(4, 8)}).shape
    torch.Size([4])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.models.top import TopModel


class EnsembleTop(nn.Module):
    """``members`` :class:`TopModel` heads on the same embeddings; the output is their mean.

    Args:
        widths, merge, hidden, dropout, out_dim: as for :class:`TopModel` (each member has its own merge).
        members: number of heads, at least 1.
    """

    def __init__(self, *, widths: Mapping[str, int], members: int, merge: str = "concat",
                 hidden: Sequence[int] = (32,), dropout: float = 0.0, out_dim: int = 1) -> None:
        super().__init__()
        if members < 1:
            raise ConfigError(f"EnsembleTop members must be at least 1, got {members}")
        self.parties = list(widths)
        self.out_dim = out_dim
        self.members = nn.ModuleList(
            TopModel(widths=widths, merge=merge, hidden=hidden, dropout=dropout, out_dim=out_dim)
            for _ in range(members))

    def forward(self, embeddings: Mapping[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
        return torch.stack([m(embeddings) for m in self.members]).mean(dim=0)
