"""Segment modules for the classic split configurations: a plain :class:`MLP` and a small CNN :class:`ImageHead`.

A topology cuts the network into segments, each a plain ``torch.nn.Module`` owned by one party. How the engine
calls a segment depends on where it sits:

- a *source* segment (fed with its owner's rows) is called ``module(cat, num)``: ``cat`` a ``LongTensor``
  ``(n, n_categorical)`` of category codes, ``num`` a ``FloatTensor`` ``(n, n_numeric)`` (like
  :class:`~vsplit.models.tabular.TabularMLP`; image pixels arrive as numeric columns and ``cat`` is ``(n, 0)``);
- a segment with one upstream input is called ``module(x)``;
- a segment with several upstream inputs is called ``module({input_name: tensor})`` (like
  :class:`~vsplit.models.top.TopModel`).

Example (vanilla split on 8x8 digits: the client runs the image head, the server the MLP with the labels):
    >>> import torch
    >>> head = ImageHead()
    >>> tail = MLP(head.out_width, hidden=(32,), out_dim=10)
    >>> pixels = torch.zeros(4, 64)
    >>> tail(head(torch.zeros(4, 0, dtype=torch.long), pixels)).shape
    torch.Size([4, 10])
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from vsplit.errors import ConfigError


class MLP(nn.Module):
    """A chain of Linear layers with ReLU (and dropout) between them; called ``mlp(x)``.

    Args:
        in_dim: width of the input.
        hidden: widths of the hidden layers.
        out_dim: width of the output.
        dropout: dropout after each hidden activation.
        final_activation: end with a ReLU too (for a middle segment whose output feeds more layers).

    Example:
        >>> import torch
        >>> MLP(3, hidden=(8, 4), out_dim=2)(torch.zeros(5, 3)).shape
        torch.Size([5, 2])
    """

    def __init__(
        self,
        in_dim: int,
        hidden: Sequence[int] = (64,),
        out_dim: int = 1,
        dropout: float = 0.0,
        final_activation: bool = False,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_dim
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU()]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = size
        layers.append(nn.Linear(width, out_dim))
        if final_activation:
            layers.append(nn.ReLU())
        self.layers = nn.Sequential(*layers)
        self.in_dim, self.out_dim = in_dim, out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class ImageHead(nn.Module):
    """A small CNN client segment for small images whose pixels are numeric columns; called ``head(cat, num)``.

    ``num`` ``(n, c*h*w)`` is reshaped to ``(n, *shape)``; each entry of ``channels`` adds a 3x3 convolution
    (padding 1) and a ReLU; a 2x2 max pool follows the last one; the result is flattened, and ``out_dim`` (if
    given) adds a Linear layer. ``out_width`` is the width of the output: ``channels[-1] * (h//2) * (w//2)``
    (256 for the defaults) or ``out_dim``.

    Example:
        >>> import torch
        >>> head = ImageHead(shape=(1, 8, 8), channels=(4,), out_dim=None)
        >>> head.out_width, head(torch.zeros(2, 0, dtype=torch.long), torch.zeros(2, 64)).shape
        (64, torch.Size([2, 64]))
    """

    def __init__(
        self,
        shape: Sequence[int] = (1, 8, 8),
        channels: Sequence[int] = (8, 16),
        out_dim: int | None = None,
    ) -> None:
        super().__init__()
        if len(shape) != 3 or not channels:
            raise ConfigError(f"ImageHead needs shape=(channels, height, width) and channels=(...), got {shape}")
        self.shape = tuple(int(s) for s in shape)
        layers: list[nn.Module] = []
        width = self.shape[0]
        for size in channels:
            layers += [nn.Conv2d(width, size, kernel_size=3, padding=1), nn.ReLU()]
            width = size
        layers += [nn.MaxPool2d(2), nn.Flatten()]
        flat = width * (self.shape[1] // 2) * (self.shape[2] // 2)
        if out_dim is not None:
            layers.append(nn.Linear(flat, out_dim))
        self.layers = nn.Sequential(*layers)
        self.out_width = flat if out_dim is None else out_dim

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        if num.shape[1] != math.prod(self.shape):
            raise ConfigError(
                f"ImageHead expects {math.prod(self.shape)} pixel columns for shape {self.shape}, got {num.shape[1]}; "
                "set shape= to the image size"
            )
        return self.layers(num.reshape(num.shape[0], *self.shape))
