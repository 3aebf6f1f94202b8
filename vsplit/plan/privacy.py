"""A cheap privacy proxy per cut: the distance correlation of the input batch and the crossing tensors.

Distance correlation (Székely et al.; the quantity NoPeek penalises) is 0 when the crossing tensors are
independent of the input and 1 when they are an exact similarity transform of it, linear or not in between. It
measures how much of the input's geometry survives in what crosses, on the batch given; it is not an attack, not a
bound on what an adversary can reconstruct, and on random inputs it says nothing about real data.

Example:
    >>> import torch
    >>> x = torch.randn(32, 5, generator=torch.Generator().manual_seed(0))
    >>> round(distance_correlation(x, 3 * x + 1), 6)
    1.0
    >>> distance_correlation(x, torch.randn(32, 5, generator=torch.Generator().manual_seed(1))) < 0.6
    True
"""

from __future__ import annotations

import numpy as np
import torch

#: Fewer rows than this and distance correlation is too noisy to report.
MIN_BATCH = 4


def centred_distances(x: torch.Tensor) -> np.ndarray:
    """The doubly centred matrix of Euclidean distances between the rows of ``x`` (2-D)."""
    rows = x.detach().double().numpy()
    squares = (rows * rows).sum(1)
    d = np.sqrt(np.clip(squares[:, None] + squares[None, :] - 2 * rows @ rows.T, 0, None))
    return d - d.mean(0, keepdims=True) - d.mean(1, keepdims=True) + d.mean()


def distance_correlation(x: torch.Tensor | np.ndarray, z: torch.Tensor | np.ndarray) -> float:
    """Sample distance correlation of the rows of ``x`` and ``z`` (2-D, same number of rows), in [0, 1].

    Either may be given as its :func:`centred_distances` already, to reuse the input's across cuts.
    """
    a = x if isinstance(x, np.ndarray) else centred_distances(x)
    b = z if isinstance(z, np.ndarray) else centred_distances(z)
    variance = float(np.sqrt((a * a).mean() * (b * b).mean()))
    return float(np.sqrt(max((a * b).mean() / variance, 0.0))) if variance > 0 else 0.0


def rows_of(tensors: list[torch.Tensor], batch: int) -> torch.Tensor | None:
    """The batched tensors flattened per row and concatenated: ``(batch, features)``, or None if there are none."""
    parts = [t.detach().reshape(batch, -1).double() for t in tensors if t.dim() and t.shape[0] == batch]
    return torch.cat(parts, dim=1) if parts else None
