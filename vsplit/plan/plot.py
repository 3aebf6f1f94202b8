"""The picture of a plan: values crossing each cut (bars) against the client's share of the FLOPs (line).

matplotlib is imported when a plot is drawn, never on ``import vsplit.plan``.
"""

from __future__ import annotations

from pathlib import Path

from vsplit.plan.plan import CutPlan


def draw(plan: CutPlan, path: str | Path, *, title: str | None = None) -> Path:
    """Write the plot of ``plan`` to ``path`` (PNG) and return the path."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = plan.rows
    best = plan.min_traffic()
    x = list(range(len(rows)))
    total = max(rows[-1].client_flops + rows[-1].server_flops, 1)
    colours = ["#d62728" if r is best else "#c7c7c7" if r.dominated or r.raw_input_crosses else "#1f77b4"
               for r in rows]
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.22 * len(rows) + 2)), 4.8), layout="constrained")
    values = [r.values_forward for r in rows]
    ax.bar(x, values, color=colours)
    raw = next((r for r in rows if r.after == "(input)"), None)
    if raw is not None:
        ax.axhline(raw.values_forward, color="black", linestyle="--", linewidth=0.8)
        ax.annotate("raw input", (len(rows) - 0.5, raw.values_forward), ha="right", va="bottom", fontsize=7)
    if max(values) > 30 * max(min(values), 1):
        ax.set_yscale("log")
    ax.set_ylabel("values crossing per sample" + (" (log scale)" if ax.get_yscale() == "log" else ""))
    ax.set_xticks(x, [r.after for r in rows], rotation=70, ha="right", fontsize=7 if len(rows) <= 30 else 6)
    share = ax.twinx()
    share.plot(x, [100 * r.client_flops / total for r in rows], color="#ff7f0e", marker=".", linewidth=1.5)
    share.set_ylabel("client share of forward FLOPs (%)", color="#ff7f0e")
    share.set_ylim(0, 105)
    ax.set_xlabel("cut after module (client runs everything up to and including it)", fontsize=8)
    ax.set_title(title or f"{plan.model}: values crossing each cut (bars; red: least traffic, {best.after}; grey: "
                 "dominated or raw input) and the client's share of the compute (line)", fontsize=9)
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
