"""The top model at the label party: merge the parties' embeddings, then an MLP to one logit.

Example:
    >>> import torch
    >>> top = TopModel(widths={"bank": 8, "partner": 8}, merge="concat", hidden=(16,))
    >>> top({"bank": torch.zeros(4, 8), "partner": torch.zeros(4, 8)}).shape
    torch.Size([4])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from vsplit.models.merge import MERGES


class TopModel(nn.Module):
    """Merges embeddings in a fixed party order and maps them to a binary-classification logit.

    Args:
        widths: embedding width of each party, in the order the merge sees them.
        merge: ``"concat"``, ``"sum"`` or ``"mean"``.
        hidden: widths of the hidden layers after the merge.
        dropout: dropout after each hidden layer.
    """

    def __init__(
        self,
        *,
        widths: Mapping[str, int],
        merge: str = "concat",
        hidden: Sequence[int] = (32,),
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.parties = list(widths)
        merge_cls = MERGES.get(merge)
        self.merge = merge_cls()
        width = merge_cls.output_width(list(widths.values()))
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [nn.ReLU(), nn.Linear(width, size)]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = size
        layers += [nn.ReLU(), nn.Linear(width, 1)]
        self.head = nn.Sequential(*layers)

    def forward(self, embeddings: Mapping[str, torch.Tensor]) -> torch.Tensor:
        merged = self.merge([embeddings[name] for name in self.parties])
        return self.head(merged).squeeze(1)
