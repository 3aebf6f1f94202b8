"""The population stability index, between the training rows and new rows, with the usual bands.

``population_stability(expected, actual) = sum over bins of (a - e) * ln(a / e)``, where ``e`` and ``a`` are the
shares of the training and the new rows in each bin: deciles of the training rows for a number (ties merge bins),
the categories for a categorical column. Empty bins count as a share of ``1e-4`` so that the logarithm stays
finite. Bands (credit-risk practice): below 0.1 stable, 0.1 to 0.25 worth a look, 0.25 or more a shift.

Credit-risk texts call it PSI; vsplit calls it the stability index, as PSI here is private set intersection.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> train = rng.normal(size=5000)
    >>> population_stability(train, train), band(population_stability(train, train + 1.0))
    (0.0, 'shift')
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: the band edges: below the first stable, below the second worth a look, else a shift
BANDS = (0.1, 0.25)
FLOOR = 1e-4


def band(value: float) -> str:
    """``"stable"`` (< 0.1), ``"monitor"`` (0.1 to 0.25) or ``"shift"`` (>= 0.25)."""
    if not np.isfinite(value):
        return "unknown"
    return "stable" if value < BANDS[0] else "monitor" if value < BANDS[1] else "shift"


def _shares(counts: np.ndarray) -> np.ndarray:
    total = counts.sum()
    shares = counts / total if total else np.zeros_like(counts, dtype=float)
    return np.maximum(shares, FLOOR)


def population_stability(expected: Sequence | np.ndarray, actual: Sequence | np.ndarray, *, bins: int = 10,
                         categorical: bool = False) -> float:
    """The stability index of ``actual`` against ``expected`` (the training rows); missing values are a bin."""
    e, a = pd.Series(np.asarray(expected)), pd.Series(np.asarray(actual))
    if categorical or not (pd.api.types.is_numeric_dtype(e) and pd.api.types.is_numeric_dtype(a)):
        keys = sorted(set(e.astype(str)) | set(a.astype(str)))
        ce = e.astype(str).value_counts().reindex(keys, fill_value=0).to_numpy(float)
        ca = a.astype(str).value_counts().reindex(keys, fill_value=0).to_numpy(float)
    else:
        ev, av = e.to_numpy(float), a.to_numpy(float)
        known = ev[np.isfinite(ev)]
        edges = np.unique(np.quantile(known, np.linspace(0, 1, bins + 1)[1:-1])) if len(known) else np.zeros(0)

        def count(v: np.ndarray) -> np.ndarray:
            finite = np.isfinite(v)
            c = np.bincount(np.searchsorted(edges, v[finite], side="right"), minlength=len(edges) + 1)
            return np.append(c, (~finite).sum()).astype(float)

        ce, ca = count(ev), count(av)
    pe, pa = _shares(ce), _shares(ca)
    value = float(np.sum((pa - pe) * np.log(pa / pe)))
    return 0.0 if abs(value) < 1e-12 else value


def stability_table(expected: pd.DataFrame, actual: pd.DataFrame, *, kind: str = "feature",
                    categorical: Sequence[str] = (), bins: int = 10) -> pd.DataFrame:
    """One row per column of ``expected`` (also in ``actual``): ``name``, ``kind``, ``stability``, ``band``."""
    rows = []
    for column in expected.columns:
        if column not in actual.columns:
            continue
        value = population_stability(expected[column], actual[column], bins=bins,
                                     categorical=column in categorical)
        rows.append({"name": str(column), "kind": kind, "stability": value, "band": band(value)})
    return pd.DataFrame(rows, columns=["name", "kind", "stability", "band"])
