"""The credit-risk plots of the report: the capture (gains) curve and the cumulative lift curve, as PNGs.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> y = np.array([0, 0, 1, 1, 0, 1]); p = np.array([0.1, 0.6, 0.4, 0.9, 0.2, 0.7])
    >>> sorted(write_credit_plots(folder, y=y, proba=p))
    ['capture', 'lift']
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vsplit.report.credit import capture_curve
from vsplit.report.plots import _save, plt


def write_credit_plots(folder: Path, *, y: np.ndarray, proba: np.ndarray,
                       baseline: np.ndarray | None = None) -> dict[str, str]:
    """Write ``capture.png`` and ``lift.png`` (the split, and the bank alone if ``baseline`` scores are given)."""
    folder.mkdir(parents=True, exist_ok=True)
    curves = {"split": capture_curve(y, proba)}
    if baseline is not None:
        curves["bank alone"] = capture_curve(y, baseline)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for name, (share, captured, _) in curves.items():
        ax.plot(share, captured, label=name)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="random")
    ax.set(xlabel="share of customers, highest score first", ylabel="share of events captured",
           title="capture curve (test)")
    ax.legend(loc="lower right")
    _save(fig, folder / "capture.png")
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for name, (share, _, lift) in curves.items():
        ax.plot(share, lift, label=name)
    ax.axhline(1.0, linestyle="--", color="grey", linewidth=1, label="random")
    ax.set(xlabel="share of customers, highest score first", ylabel="cumulative lift", title="lift curve (test)")
    ax.legend(loc="upper right")
    _save(fig, folder / "lift.png")
    return {"capture": "capture.png", "lift": "lift.png"}
