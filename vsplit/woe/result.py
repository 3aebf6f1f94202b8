"""What a binning leaves each party: :class:`PartyBinning` (its own WOE maps and IVs) and, at the label party,
:class:`ValueReport` (the binning tables of every party's attributes).

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.woe.fine import fit_fine_bins
    >>> from vsplit.woe.maps import WoeMap
    >>> table = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0]})
    >>> fine = fit_fine_bins(table, max_bins=2)[0]
    >>> woe_map = WoeMap(fine=fine, coarse_of_fine=np.array([0, 1, 2]), woe=np.array([0.4, -0.4, 0.0]))
    >>> mine = PartyBinning(maps=[woe_map], iv={"x": 0.3})
    >>> mine.woe_frame(table)["x"].tolist(), mine.select(min_iv=0.5)
    ([0.4, 0.4, -0.4, -0.4], [])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from vsplit.woe.maps import WoeMap, woe_matrix
from vsplit.woe.tables import BinningTable, ranked


@dataclass
class PartyBinning:
    """One party's own result: a :class:`~vsplit.woe.maps.WoeMap` per attribute (its fine bins stay its own) and
    each attribute's IV, by column name."""

    maps: list[WoeMap]
    iv: dict[str, float]

    @property
    def attributes(self) -> list[str]:
        """The attributes binned, in column order."""
        return [m.name for m in self.maps]

    def woe_matrix(self, table: pd.DataFrame, attributes: list[str] | None = None) -> np.ndarray:
        """float64 ``(rows, attributes)``: this party's ``table`` as WOE values (``attributes``: only those, in that
        order; default: all, in column order)."""
        return woe_matrix(self._maps(attributes), table)

    def woe_frame(self, table: pd.DataFrame, attributes: list[str] | None = None) -> pd.DataFrame:
        """:meth:`woe_matrix` as a DataFrame with the attributes' names and ``table``'s index."""
        maps = self._maps(attributes)
        return pd.DataFrame(woe_matrix(maps, table), columns=[m.name for m in maps], index=table.index)

    def select(self, *, min_iv: float = 0.0, top_k: int = 0) -> list[str]:
        """The attributes a later training takes: IV at least ``min_iv``, then the ``top_k`` best (0: all), by IV."""
        chosen = sorted((a for a in self.attributes if self.iv[a] >= min_iv), key=lambda a: (-self.iv[a], a))
        return chosen[:top_k] if top_k > 0 else chosen

    def _maps(self, attributes: list[str] | None) -> list[WoeMap]:
        if attributes is None:
            return list(self.maps)
        by_name = {m.name: m for m in self.maps}
        unknown = [a for a in attributes if a not in by_name]
        if unknown:
            from vsplit.errors import ConfigError

            raise ConfigError(f"woe: attribute {unknown[0]!r} was not binned; choose among {sorted(by_name)}")
        return [by_name[a] for a in attributes]


@dataclass
class ValueReport:
    """The label party's view of a binning: every party's attributes' binning tables (a partner's named as it
    chose), the rows and events they were counted on, and its own :class:`PartyBinning`."""

    label_party: str
    tables: list[BinningTable]
    rows: int
    events: int
    own: PartyBinning | None = None
    #: hooks for later sections (e.g. the scorecard's Gini of bank alone vs joint): title -> Markdown
    sections: dict[str, str] = field(default_factory=dict)
    #: the Gini of a bank-only scorecard against a joint one on validation rows (:mod:`vsplit.woe.gini`), when asked
    gini: dict[str, Any] | None = None

    def ranked(self) -> list[BinningTable]:
        """The tables by IV, highest first."""
        return ranked(self.tables)

    def iv(self, party: str | None = None) -> dict[str, float]:
        """Attribute -> IV (of ``party`` only, if given)."""
        return {t.attribute: t.iv for t in self.tables if party is None or t.party == party}

    def summary(self) -> pd.DataFrame:
        """One row per attribute, ranked: party, attribute, bins, IV, band."""
        return pd.DataFrame([{"party": t.party, "attribute": t.attribute, "bins": len(t.bins), "iv": t.iv,
                              "band": t.band} for t in self.ranked()])

    def table(self, attribute: str) -> BinningTable:
        """The binning table of ``attribute`` (as named in :meth:`summary`)."""
        for t in self.tables:
            if t.attribute == attribute:
                return t
        from vsplit.errors import ConfigError

        raise ConfigError(f"woe: no attribute {attribute!r}; choose among {[t.attribute for t in self.tables]}")
