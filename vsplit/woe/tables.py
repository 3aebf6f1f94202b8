"""The label party's binning tables: per attribute of every party its coarse bins' counts, event rate, WOE and IV.

A partner's attribute is named as the partner chose (``[woe] share_names``): its column name, or ``"<party>#<k>"``, its
position among that partner's attributes. Its bins are ``bin 0``, ``bin 1``, ... in the partner's order (the label
party never learns an edge), and ``missing``.

Example:
    >>> import numpy as np
    >>> t = BinningTable(party="shop", attribute="shop#0", kind="numeric", bins=("bin 0", "bin 1", "missing"),
    ...                  events=np.array([10, 40, 0]), nonevents=np.array([90, 60, 0]))
    >>> round(t.iv, 4), t.band, t.frame()["Event rate"].round(2).tolist()
    (0.7167, 'strong', [0.1, 0.4, 0.0, 0.25])
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from vsplit.woe.classing import woe_iv

#: credit scoring's IV bands: (upper bound, name)
IV_BANDS: tuple[tuple[float, str], ...] = ((0.02, "useless"), (0.1, "weak"), (0.3, "medium"), (math.inf, "strong"))


def iv_band(iv: float) -> str:
    """The band of an information value: < 0.02 useless, 0.02-0.1 weak, 0.1-0.3 medium, > 0.3 strong.

    Example:
        >>> [iv_band(v) for v in (0.01, 0.05, 0.2, 0.5)]
        ['useless', 'weak', 'medium', 'strong']
    """
    return next(name for bound, name in IV_BANDS if iv < bound)


@dataclass(frozen=True, eq=False)
class BinningTable:
    """One attribute's coarse bins at the label party (``events``/``nonevents`` per bin, the missing bin last)."""

    party: str
    attribute: str
    kind: str
    bins: tuple[str, ...]
    events: np.ndarray
    nonevents: np.ndarray
    #: each fine bin's coarse index (the classing the owner is told); ``None`` where not kept
    coarse_of_fine: np.ndarray | None = None

    @property
    def counts(self) -> np.ndarray:
        """Rows per coarse bin."""
        return np.asarray(self.events) + np.asarray(self.nonevents)

    @property
    def woe(self) -> np.ndarray:
        """WOE per coarse bin (optbinning's sign: positive where the event rate is below the whole's)."""
        return woe_iv(self.events, self.nonevents)[0]

    @property
    def iv_bins(self) -> np.ndarray:
        """Each coarse bin's share of the IV."""
        return woe_iv(self.events, self.nonevents)[1]

    @property
    def iv(self) -> float:
        """The attribute's information value."""
        return float(self.iv_bins.sum())

    @property
    def band(self) -> str:
        """Its IV band (:func:`iv_band`)."""
        return iv_band(self.iv)

    def frame(self) -> pd.DataFrame:
        """The binning table as optbinning prints it: a row per bin and a ``Totals`` row."""
        counts = self.counts
        total = max(int(counts.sum()), 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(counts > 0, np.asarray(self.events) / np.maximum(counts, 1), 0.0)
        out = pd.DataFrame({"Bin": list(self.bins), "Count": counts, "Count (%)": counts / total,
                            "Non-event": self.nonevents, "Event": self.events, "Event rate": rate, "WoE": self.woe,
                            "IV": self.iv_bins})
        totals = {"Bin": "Totals", "Count": int(counts.sum()), "Count (%)": 1.0,
                  "Non-event": int(np.sum(self.nonevents)), "Event": int(np.sum(self.events)),
                  "Event rate": float(np.sum(self.events)) / total, "WoE": np.nan, "IV": self.iv}
        return pd.concat([out, pd.DataFrame([totals])], ignore_index=True)


def ranked(tables: Iterable[BinningTable]) -> list[BinningTable]:
    """The tables by IV, highest first (ties: party, then attribute)."""
    return sorted(tables, key=lambda t: (-t.iv, t.party, t.attribute))


def select_attributes(tables: Iterable[BinningTable], *, party: str, min_iv: float = 0.0,
                      top_k: int = 0) -> list[str]:
    """The attributes of ``party`` a later training takes: IV at least ``min_iv``, the ``top_k`` best (0: all).

    Example:
        >>> import numpy as np
        >>> t = [BinningTable(party="bank", attribute=a, kind="numeric", bins=("b0", "b1", "missing"),
        ...                   events=np.array([e, 50 - e, 0]), nonevents=np.array([50, 50, 0])) for a, e in
        ...      (("age", 10), ("job", 24), ("debt", 2))]
        >>> select_attributes(t, party="bank", min_iv=0.02), select_attributes(t, party="bank", top_k=1)
        (['debt', 'age'], ['debt'])
    """
    chosen = [t for t in ranked(tables) if t.party == party and t.iv >= min_iv]
    return [t.attribute for t in (chosen[:top_k] if top_k > 0 else chosen)]
