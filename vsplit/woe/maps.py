"""What each party keeps of a binning: per attribute its :class:`WoeMap` (fine bins, private, -> coarse bin -> WOE).

The label party tells a partner, per attribute, which of its fine bins merge (indices only) and the WOE of each coarse
bin; the partner joins them to its own fine bins here, so it can turn its own table into WOE values
(:func:`woe_matrix`) for a scorecard without ever having sent a value or an edge. The label party keeps the same for
its own attributes.

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.woe.fine import fit_fine_bins
    >>> table = pd.DataFrame({"age": [20.0, 30.0, 40.0, 50.0, None]})
    >>> fine = fit_fine_bins(table, max_bins=4)[0]
    >>> m = WoeMap(fine=fine, coarse_of_fine=np.array([0, 0, 1, 1, 2]), woe=np.array([0.5, -0.5, 0.0]))
    >>> woe_matrix([m], table).tolist()
    [[0.5], [0.5], [-0.5], [-0.5], [0.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from vsplit.errors import DataError, ProtocolError
from vsplit.woe.fine import CATEGORY, FineBins


@dataclass(frozen=True, eq=False)
class WoeMap:
    """One attribute's map, held by its owner: ``fine`` (edges or categories: private), ``coarse_of_fine`` (each fine
    bin's coarse index, the label party's classing), ``woe`` (per coarse bin). A value in a category never seen when
    binning gets WOE 0, the population's own (no evidence either way)."""

    fine: FineBins
    coarse_of_fine: np.ndarray
    woe: np.ndarray

    def __post_init__(self) -> None:
        coarse = np.asarray(self.coarse_of_fine)
        if coarse.shape != (self.fine.n_bins,) or coarse.min() < 0 or coarse.max() >= len(self.woe):
            raise ProtocolError(f"woe: the classing of attribute {self.fine.name!r} does not fit its "
                                f"{self.fine.n_bins} fine bins and {len(self.woe)} coarse bins")
        if not np.isfinite(self.woe).all():
            raise ProtocolError(f"woe: a WOE of attribute {self.fine.name!r} is not finite")

    @property
    def name(self) -> str:
        """The attribute's column name (its owner's)."""
        return self.fine.name

    @property
    def n_coarse(self) -> int:
        """Coarse bins, the missing bin included."""
        return len(self.woe)

    def coarse(self, values: pd.Series | np.ndarray) -> np.ndarray:
        """Each value's coarse bin (``-1``: a category never seen when binning)."""
        codes = self.fine.codes(values)
        return np.where(codes >= 0, np.asarray(self.coarse_of_fine)[np.maximum(codes, 0)], -1)

    def transform(self, values: pd.Series | np.ndarray) -> np.ndarray:
        """Each value's WOE (float64)."""
        coarse = self.coarse(values)
        return np.where(coarse >= 0, np.asarray(self.woe, dtype=np.float64)[np.maximum(coarse, 0)], 0.0)

    def coarse_labels(self) -> list[str]:
        """Each coarse bin as its owner reads it (the fine bins it joins)."""
        fine = np.asarray(self.coarse_of_fine)
        out = []
        for c in range(self.n_coarse):  # a loop over coarse bins
            members = np.nonzero(fine == c)[0].tolist()
            if not members:
                out.append("(empty)")
            elif self.fine.kind == CATEGORY or members[-1] == self.fine.n_bins - 1:
                out.append(" + ".join(self.fine.label(k) for k in members))
            else:
                low, high = self.fine.label(members[0]), self.fine.label(members[-1])
                out.append(low.split(",")[0] + "," + high.split(",")[1])
        return out

    def state(self) -> dict[str, Any]:
        """Plain arrays and strings, for :func:`vsplit.runtime.checkpoint.save_checkpoint`."""
        f = self.fine
        return {"name": f.name, "kind": f.kind, "edges": np.asarray(f.edges, dtype=np.float64),
                "categories": list(f.categories), "category_bin": np.asarray(f.category_bin, dtype=np.int64),
                "coarse_of_fine": np.asarray(self.coarse_of_fine, dtype=np.int64),
                "woe": np.asarray(self.woe, dtype=np.float64)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WoeMap:
        """The map :meth:`state` wrote."""
        fine = FineBins(name=str(state["name"]), kind=str(state["kind"]),
                        edges=np.asarray(state["edges"], dtype=np.float64),
                        categories=tuple(str(c) for c in state["categories"]),
                        category_bin=tuple(int(b) for b in np.asarray(state["category_bin"]).ravel()))
        return cls(fine=fine, coarse_of_fine=np.asarray(state["coarse_of_fine"], dtype=np.int64),
                   woe=np.asarray(state["woe"], dtype=np.float64))


def woe_matrix(maps: Sequence[WoeMap], table: pd.DataFrame) -> np.ndarray:
    """float64 ``(rows, attributes)``: each of ``maps``' attributes of this party's ``table`` as its WOE.

    Raises:
        DataError: ``table`` lacks an attribute of the maps.
    """
    missing = [m.name for m in maps if m.name not in table.columns]
    if missing:
        raise DataError(f"woe: the table has no column {missing[0]!r}; it was binned with one")
    out = np.empty((len(table), len(maps)))
    for i, m in enumerate(maps):  # a loop over attributes
        out[:, i] = m.transform(table[m.name])
    return out
