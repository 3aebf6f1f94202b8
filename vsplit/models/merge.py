"""How the top model merges the parties' embeddings: ``concat``, ``sum``, ``mean`` or ``attention``.

A merge is built from the embedding widths in the order it will see them, ``MERGES.get(name)(widths)``, and
``output_width(widths)`` tells the width of what it returns. ``concat``, ``sum`` and ``mean`` have no parameters;
``attention`` learns how much each party counts for each row (see :class:`Attention`).

Example:
    >>> import torch
    >>> merge = MERGES.get("sum")([3, 3])
    >>> merge([torch.ones(2, 3), torch.ones(2, 3)]).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    >>> MERGES.get("concat").output_width([3, 5])
    8
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.models.registry import Registry

MERGES: Registry[type[nn.Module]] = Registry("merge")


@MERGES.register("concat")
class Concat(nn.Module):
    """Concatenate the embeddings along the feature axis."""

    def __init__(self, widths: Sequence[int] = ()) -> None:
        super().__init__()

    @staticmethod
    def output_width(widths: Sequence[int]) -> int:
        return sum(widths)

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(parts, dim=1)


class _Elementwise(nn.Module):
    def __init__(self, widths: Sequence[int] = ()) -> None:
        super().__init__()
        if widths:
            self.output_width(widths)

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


@MERGES.register("attention")
class Attention(nn.Module):
    """Attention over parties: a weighted sum of the projected embeddings, weights learned per row.

    Each party's embedding is projected to a common width ``d = max(widths)`` by a :class:`~torch.nn.Linear` of its
    own; a learned query ``q`` (width ``d``) scores each projection ``p_i`` by the scaled dot product
    ``p_i · q / sqrt(d)``; a softmax over the parties turns the scores into weights; the output is
    ``sum_i weight_i * p_i`` (width ``d``). The query starts at zero, so training starts from the mean of the
    projections.

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> merge = Attention([3, 5])
        >>> parts = [torch.ones(2, 3), torch.ones(2, 5)]
        >>> merge(parts).shape, merge.weights(parts).sum(1).tolist()
        (torch.Size([2, 5]), [1.0, 1.0])
    """

    def __init__(self, widths: Sequence[int]) -> None:
        super().__init__()
        if not widths:
            raise ConfigError("merge='attention' needs the embedding widths of the parties, got none")
        self.width = self.output_width(widths)
        self.projections = nn.ModuleList(nn.Linear(w, self.width) for w in widths)
        self.query = nn.Parameter(torch.zeros(self.width))

    @staticmethod
    def output_width(widths: Sequence[int]) -> int:
        return max(widths)

    def _project(self, parts: list[torch.Tensor]) -> torch.Tensor:
        if len(parts) != len(self.projections):
            raise ConfigError(f"attention merge built for {len(self.projections)} parties got {len(parts)} embeddings")
        return torch.stack([proj(x) for proj, x in zip(self.projections, parts, strict=True)], dim=1)

    def _weights(self, projected: torch.Tensor) -> torch.Tensor:
        return torch.softmax(projected @ self.query / math.sqrt(self.width), dim=1)

    def weights(self, parts: list[torch.Tensor]) -> torch.Tensor:
        """Per-row weight of each party, shape ``(n, n_parties)``; rows sum to one."""
        return self._weights(self._project(parts))

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        projected = self._project(parts)  # (n, parties, d)
        return (self._weights(projected).unsqueeze(2) * projected).sum(1)
