"""Small WOE inputs for the scorecard tests: a bank and two partners, WOE from pooled counts (the formula the
binning across the cut computes from encrypted counts), and the pooled run that the split runs must equal."""

from __future__ import annotations

import numpy as np

from vsplit.scorecard import ScorecardParams, WoeColumns

PARAMS = ScorecardParams(iterations=8, learning_rate=2.0, l2=0.01)
ROWS = 240


def pooled_woe(codes: np.ndarray, labels: np.ndarray, bins: int) -> np.ndarray:
    """ln(share of events / share of non-events) per bin, with 0.5 added to each count."""
    events = np.bincount(codes, weights=labels, minlength=bins) + 0.5
    others = np.bincount(codes, weights=1 - labels, minlength=bins) + 0.5
    return np.log((events / events.sum()) / (others / others.sum()))


def parties(seed: int = 0, rows: int = ROWS) -> tuple[np.ndarray, dict[str, WoeColumns]]:
    """Labels and each party's WOE inputs (bank: 2 attributes, shop and telco: 2 each, 3-5 bins)."""
    rng = np.random.default_rng(seed)
    signal = rng.normal(size=(rows, 6))
    labels = (signal @ np.array([0.8, -0.5, 0.6, 0.4, -0.7, 0.3]) + rng.normal(size=rows) > 0).astype(float)
    out = {}
    for name, cols in (("bank", (0, 1)), ("shop", (2, 3)), ("telco", (4, 5))):
        codes, tables = [], []
        for c in cols:
            bins = 3 + (c % 3)
            edges = np.quantile(signal[:, c], np.linspace(0, 1, bins + 1)[1:-1])
            code = np.searchsorted(edges, signal[:, c])
            codes.append(code)
            tables.append(pooled_woe(code, labels, bins))
        out[name] = WoeColumns(names=tuple(f"{name}_{k}" for k in range(len(cols))), woe=tuple(tables),
                               codes=np.column_stack(codes))
    return labels, out
