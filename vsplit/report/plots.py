"""The report's plots, with matplotlib (headless Agg backend), each written atomically as a PNG.

ROC curve, KS curve (cumulative share of positives and negatives by score), loss and validation AUC per epoch,
and split training next to its baselines.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> y = np.array([0, 0, 1, 1]); p = np.array([0.1, 0.6, 0.4, 0.9])
    >>> names = write_plots(folder, y=y, proba=p, history=[{"epoch": 0, "train_loss": 0.5, "val_auc": 0.7}],
    ...                     aucs={"split": 0.75, "bank alone": 0.6})
    >>> sorted(names)
    ['auc_comparison', 'history', 'ks', 'roc']
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from vsplit.atomic import write_atomic
from vsplit.metrics import roc_auc


def _nan(value: float | None) -> float:
    """A history value for plotting: an undefined one (null) as NaN, which matplotlib leaves out."""
    return float("nan") if value is None else value


def _save(fig: Any, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buffer.getvalue())


def write_plots(
    folder: Path,
    *,
    y: np.ndarray,
    proba: np.ndarray,
    history: Sequence[Mapping[str, Any]],
    aucs: Mapping[str, float],
    curves: Mapping[str, np.ndarray] | None = None,
) -> dict[str, str]:
    """Write the four plots into ``folder``; return ``{plot name: file name}``. ``curves``: each compared model's
    probabilities of the same rows (e.g. ``{"bank alone": ...}``), drawn on the ROC plot beside the split's."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"roc": "roc.png", "ks": "ks.png", "history": "history.png", "auc_comparison": "auc_comparison.png"}
    from sklearn.metrics import roc_curve  # here: a partner's report (no labels) never draws it

    fpr, tpr, _ = roc_curve(y, proba)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot(fpr, tpr, label=f"split (AUC {aucs.get('split', float('nan')):.3f})")
    for name, other in (curves or {}).items():
        keep = np.isfinite(other)
        if keep.any() and len(np.unique(y[keep])) == 2:
            fpr_o, tpr_o, _ = roc_curve(y[keep], other[keep])
            auc = aucs.get(name, roc_auc(y[keep], other[keep]))
            ax.plot(fpr_o, tpr_o, label=f"{name.replace('_', ' ')} (AUC {auc:.3f})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC curve (test)")
    ax.legend(loc="lower right")
    _save(fig, folder / files["roc"])

    order = np.argsort(-proba)
    positives = np.cumsum(y[order] == 1) / max(1, int((y == 1).sum()))
    negatives = np.cumsum(y[order] == 0) / max(1, int((y == 0).sum()))
    share = np.arange(1, len(y) + 1) / len(y)
    gap = positives - negatives
    at = int(np.argmax(gap))
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot(share, positives, label="positives")
    ax.plot(share, negatives, label="negatives")
    ax.vlines(share[at], negatives[at], positives[at], colors="black", linestyles=":", label=f"KS {gap[at]:.3f}")
    ax.set(xlabel="share of customers, highest score first", ylabel="cumulative share", title="KS curve (test)")
    ax.legend(loc="lower right")
    _save(fig, folder / files["ks"])

    epochs = [h["epoch"] + 1 for h in history]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(epochs, [h.get("train_loss", np.nan) for h in history], marker="o", label="train loss")
    if any("val_loss" in h for h in history):
        ax.plot(epochs, [_nan(h.get("val_loss")) for h in history], marker="o", label="validation loss")
    ax.set(xlabel="epoch", ylabel="log loss", title="training")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = ax.get_legend_handles_labels()
    if any("val_auc" in h for h in history):
        twin = ax.twinx()
        twin.plot(epochs, [_nan(h.get("val_auc")) for h in history], marker="s", color="tab:green",
                  label="validation AUC")
        twin.set_ylabel("validation AUC")
        more_handles, more_labels = twin.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False)
    _save(fig, folder / files["history"])

    plot_auc_comparison(folder / files["auc_comparison"], aucs)
    return files


def auc_axis_start(values: Sequence[float]) -> float:
    """Where the AUC axis starts: 0.5 (chance), or lower, by tenths, so that a bar below chance shows too.

    >>> auc_axis_start([0.8, 0.7]), auc_axis_start([0.8, 0.42]), auc_axis_start([0.8, float("nan")])
    (0.5, 0.3, 0.5)
    """
    lowest = min((v for v in values if v == v), default=0.5)
    if lowest >= 0.5:
        return 0.5
    return max(0.0, round(float(np.floor(lowest * 10)) / 10 - 0.1, 1))  # a tenth below the bar: room for its label


def plot_auc_comparison(path: Path, aucs: Mapping[str, float]) -> None:
    """A bar per model: split training next to its baselines."""
    fig, ax = plt.subplots(figsize=(6, 3))
    names = [n.replace("_", " ") for n in aucs]
    values = list(aucs.values())
    bars = ax.barh(names, values, color=["tab:blue" if n == "split" else "tab:grey" for n in names])
    ax.bar_label(bars, labels=[f"{v:.4f}" for v in values], padding=3)
    ax.set(xlim=(auc_axis_start(values), 1.0), xlabel="test ROC AUC", title="split training vs. baselines")
    _save(fig, path)
