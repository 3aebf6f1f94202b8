"""How the top model merges the parties' embeddings: ``concat``, ``sum`` or ``mean``.

Example:
    >>> import torch
    >>> merge = MERGES.get("sum")()
    >>> merge([torch.ones(2, 3), torch.ones(2, 3)]).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    >>> MERGES.get("concat").output_width([3, 5])
    8
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.models.registry import Registry

MERGES: Registry[type[nn.Module]] = Registry("merge")


@MERGES.register("concat")
class Concat(nn.Module):
    """Concatenate the embeddings along the feature axis."""

    @staticmethod
    def output_width(widths: Sequence[int]) -> int:
        return sum(widths)

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(parts, dim=1)


class _Elementwise(nn.Module):
    @staticmethod
    def output_width(widths: Sequence[int]) -> int:
        if len(set(widths)) != 1:
            raise ConfigError(f"sum/mean merges need equal embedding widths, got {list(widths)}; use merge='concat'")
        return widths[0]


@MERGES.register("sum")
class Sum(_Elementwise):
    """Add the embeddings (all parties must use the same width)."""

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(parts).sum(0)


@MERGES.register("mean")
class Mean(_Elementwise):
    """Average the embeddings (all parties must use the same width)."""

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(parts).mean(0)
