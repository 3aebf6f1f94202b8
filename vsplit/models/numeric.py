"""Numeric feature embeddings inside a party's bottom model: each numeric column becomes a small vector.

Theory of operation: a plain MLP sees a numeric column as one number and fits smooth functions of it poorly. A
*piecewise-linear* embedding (Gorishniy et al., 2022) cuts the column at quantile bin edges and encodes a value by
how far it lies into each bin, then maps that code to ``width`` numbers; a *periodic* embedding maps it through
``sin``/``cos`` of learned frequencies. Both come from ``rtdl-num-embeddings``. The bin edges are fitted on the
party's own training rows (its preprocessed numeric columns, like the scaler), are stored as buffers of the party's
bottom module, and never leave the party: only the bottom's output crosses the cut, so the split still equals the
same network trained in one place (the module is the same object, placed elsewhere).

Example:
    >>> import torch
    >>> num = torch.rand(200, 3)
    >>> layer = numeric_embedding("piecewise", num, width=4, n_bins=8)
    >>> layer(num[:5]).shape
    torch.Size([5, 12])
    >>> numeric_embedding("none", num, width=4, n_bins=8) is None
    True
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from vsplit.errors import ConfigError

#: the kinds of ``model.numeric_embedding`` ("auto" is resolved by the config: piecewise, none for horizontal)
NUMERIC_EMBEDDINGS = ("none", "piecewise", "periodic")


class NumericEmbedding(nn.Module):
    """Embeds each numeric column into ``width`` numbers and flattens: ``(n, n_numeric) -> (n, n_numeric * width)``.

    Columns with a single distinct value in the training rows carry no information: they are passed through as
    they are (one number each) instead of being binned.
    """

    def __init__(self, layer: nn.Module, *, binned: list[int], passed: list[int], width: int) -> None:
        super().__init__()
        self.layer = layer
        self.register_buffer("binned", torch.tensor(binned, dtype=torch.long), persistent=False)
        self.register_buffer("passed", torch.tensor(passed, dtype=torch.long), persistent=False)
        self.out_width = len(binned) * width + len(passed)

    def forward(self, num: torch.Tensor) -> torch.Tensor:
        parts = [self.layer(num[:, self.binned]).flatten(1)] if len(self.binned) else []
        if len(self.passed):
            parts.append(num[:, self.passed])
        return torch.cat(parts, dim=1)


def numeric_embedding(kind: str, num: torch.Tensor, *, width: int, n_bins: int) -> NumericEmbedding | None:
    """The numeric embedding ``kind`` fitted on the training rows ``num`` (``None`` for ``"none"``).

    Args:
        kind: ``"none"``, ``"piecewise"`` (bins from quantiles of ``num``) or ``"periodic"``.
        num: the party's preprocessed numeric columns, training rows only.
        width: numbers per column after embedding.
        n_bins: (piecewise) at most this many bins per column.
    """
    if kind not in NUMERIC_EMBEDDINGS:
        raise ConfigError(f"unknown numeric embedding {kind!r}; choose one of: {', '.join(NUMERIC_EMBEDDINGS)}")
    if kind == "none" or num.shape[1] == 0:
        return None
    if width < 1 or n_bins < 2:
        raise ConfigError(f"numeric embedding: width must be >= 1 and bins >= 2, got width {width}, bins {n_bins}")
    import rtdl_num_embeddings as rtdl

    if num.shape[0] < 3:  # too few rows to cut into bins: the columns go in as they are
        return None
    n_bins = min(n_bins, num.shape[0] - 1)
    distinct = [int(torch.unique(num[:, j]).numel()) for j in range(num.shape[1])]
    binned = [j for j, d in enumerate(distinct) if d > 1]
    passed = [j for j, d in enumerate(distinct) if d <= 1]
    if not binned:
        return None
    if kind == "piecewise":
        with warnings.catch_warnings():  # a two-valued column has one bin: fine, and not worth a warning per run
            warnings.simplefilter("ignore", UserWarning)
            bins = rtdl.compute_bins(num[:, binned], n_bins=n_bins)
            layer = rtdl.PiecewiseLinearEmbeddings(bins, width, activation=False, version="B")
    else:
        layer = rtdl.PeriodicEmbeddings(len(binned), width, lite=False)
    return NumericEmbedding(layer, binned=binned, passed=passed, width=width)
