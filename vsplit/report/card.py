"""A model card: what a model validator reads first, rendered to Markdown and to one-file HTML.

The card is plain data (a dict, built from a run's own records by :mod:`vsplit.explain.card`): data (row counts per
party, the intersection, the date range where given), topology and cut, training recipe and seeds, metrics with
bootstrap intervals, calibration, global importances (own columns and each partner as one group), fairness slices,
privacy defenses and their measured leakage, and known limits; a boosted-trees card also its trees (kept, depth, each
party's splits, the held-out loss after each tree). :func:`write_model_card` writes ``model_card.md``,
its pictures (``card_importance.png``, ``card_reliability.png``) and ``model_card.html`` into a folder.

Example:
    >>> card = {"title": "demo", "data": {"rows": {"bank": 100, "shop": 90}, "intersection": 80},
    ...         "metrics": {"auc": 0.8, "auc_interval": [0.75, 0.85], "level": 0.95, "draws": 50, "rows": 40}}
    >>> text = card_markdown(card)
    >>> "| bank | 100 |" in text and "0.800 (0.750 to 0.850)" in text
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vsplit.atomic import write_atomic

MARKDOWN, HTML, RECORD = "model_card.md", "model_card.html", "model_card.json"
IMPORTANCE, RELIABILITY = "card_importance.png", "card_reliability.png"
VALIDATION = "card_validation.png"


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return "n/a" if value != value else f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_num(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def card_markdown(card: Mapping[str, Any], *, pictures: Mapping[str, str] | None = None) -> str:
    """The card as Markdown (``pictures``: the PNG file of ``importance`` and ``reliability``, if drawn)."""
    pictures = dict(pictures or {})
    out = [f"# Model card: {card.get('title', 'split model')}", ""]
    data = card.get("data", {})
    if data:
        out += ["## Data", ""]
        out += _table(["party", "rows"], sorted(data.get("rows", {}).items()))
        facts = [("customers every party knows (PSI intersection)", data.get("intersection")),
                 ("test rows scored", data.get("test_rows")), ("date range", data.get("date_range"))]
        out += [f"- {k}: {_num(v)}" for k, v in facts if v is not None] + [""]
    topology = card.get("topology", {})
    if topology:
        out += ["## Topology and cut", "", f"- kind: {topology.get('kind')}"]
        out += [f"- segment {s}" for s in topology.get("segments", [])]
        out += [f"- cut: {c}" for c in topology.get("cuts", [])] + [""]
    recipe = card.get("recipe", {})
    if recipe:
        out += ["## Training recipe and seeds", "", *_table(["setting", "value"], sorted(recipe.items()))]
    out += _trees_markdown(card.get("trees"), pictures)
    metrics = card.get("metrics", {})
    if metrics:
        level = round(100 * metrics.get("level", 0.95))
        interval = metrics.get("auc_interval")
        auc = _num(metrics.get("auc")) + (f" ({_num(interval[0])} to {_num(interval[1])})" if interval else "")
        rows = [("AUC, bootstrap " + f"{level}% interval", auc)]
        rows += [(k, _num(metrics[k], 4)) for k in ("brier", "ece", "ece_calibrated") if k in metrics]
        out += ["## Metrics", "", *_table(["metric", "value"], rows)]
        out += [f"Intervals: {metrics.get('draws')} bootstrap resamples of the {metrics.get('rows')} test rows.", ""]
    if "reliability" in pictures:
        out += ["## Calibration", "", f"![reliability]({pictures['reliability']})", ""]
    importance = card.get("importance", {})
    if importance:
        method = "path attribution over the trees" if card.get("trees") else "integrated gradients"
        out += ["## What drives the score", "", f"Mean absolute attribution ({method}, log-odds); a "
                "partner counts as one group.", ""]
        out += _table(["input", "mean |attribution|"], [(k, _num(float(v), 4)) for k, v in importance.items()])
        if "importance" in pictures:
            out += [f"![importance]({pictures['importance']})", ""]
    fairness = card.get("fairness")
    if fairness:
        out += [f"## Fairness slices: {fairness['column']}", ""]
        out += _table(["slice", "rows", "AUC", "approval rate"],
                      [(s["slice"], s["rows"], s["auc"], s["approval_rate"]) for s in fairness["slices"]])
    privacy = card.get("privacy", {})
    if privacy:
        out += ["## Privacy", "", f"- defenses: {', '.join(privacy.get('defenses') or ['none'])}"]
        out += [f"- {k}: {_num(v)}" for k, v in sorted(privacy.get("leakage", {}).items())]
        out += [f"- {line}" for line in privacy.get("notes", [])] + [""]
    limits = card.get("limits", [])
    if limits:
        out += ["## Known limits", ""] + [f"- {line}" for line in limits] + [""]
    return "\n".join(out).rstrip() + "\n"


def _trees_markdown(trees: Mapping[str, Any] | None, pictures: Mapping[str, str]) -> list[str]:
    """A boosted-trees card's trees: kept and trained, depth, leaves, each party's splits, the held-out loss."""
    if not trees:
        return []
    out = ["## Trees", "", f"- kept: {trees.get('kept')} of {trees.get('trained')} trained (early stopping keeps the "
           "best prefix on the held-out rows)",
           f"- deepest: {trees.get('depth')} levels; leaves: {trees.get('leaves')}", ""]
    share = trees.get("share", {})
    out += _table(["party", "splits", "share of splits"],
                  [(p, n, f"{100 * share.get(p, 0.0):.1f} %") for p, n in trees.get("splits", {}).items()])
    losses = trees.get("validation_loss") or []
    if losses:
        best = min(range(len(losses)), key=losses.__getitem__)
        out += [f"Held-out log loss after each tree: from {_num(losses[0], 4)} after the first to "
                f"{_num(losses[best], 4)} after tree {best + 1} (the best), {_num(losses[-1], 4)} after the last.", ""]
        if "validation" in pictures:
            out += [f"![validation]({pictures['validation']})", ""]
    return out


def _pictures(folder: Path, card: Mapping[str, Any]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vsplit.report.plots import _save

    drawn = {}
    importance = card.get("importance", {})
    if importance:
        names = list(importance)[:15][::-1]
        fig, ax = plt.subplots(figsize=(6, 0.35 * len(names) + 1))
        ax.barh(names, [float(importance[n]) for n in names], color="#3b6ea5")
        ax.set_xlabel("mean |attribution| (log-odds)")
        _save(fig, folder / IMPORTANCE)
        drawn["importance"] = IMPORTANCE
    losses = (card.get("trees") or {}).get("validation_loss")
    if losses:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(range(1, len(losses) + 1), losses, marker=".")
        ax.set_xlabel("trees")
        ax.set_ylabel("held-out log loss")
        _save(fig, folder / VALIDATION)
        drawn["validation"] = VALIDATION
    curve = card.get("metrics", {}).get("curve")
    if curve and curve.get("mean_predicted"):
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        ax.plot([0, 1], [0, 1], color="#999", linestyle="--", linewidth=1)
        ax.plot(curve["mean_predicted"], curve["observed_rate"], marker="o", label="model")
        calibrated = card.get("metrics", {}).get("curve_calibrated")
        if calibrated and calibrated.get("mean_predicted"):
            ax.plot(calibrated["mean_predicted"], calibrated["observed_rate"], marker="s", label="calibrated")
        ax.set_xlabel("predicted probability")
        ax.set_ylabel("observed rate")
        ax.legend()
        _save(fig, folder / RELIABILITY)
        drawn["reliability"] = RELIABILITY
    return drawn


def write_model_card(folder: Path, card: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write ``model_card.md``, its pictures, ``model_card.html`` (pictures inline) and the card's data
    (``model_card.json``, so that a later step can add to it) into ``folder``."""
    from vsplit.report.html import write_html_report
    from vsplit.strict_json import dumps

    folder.mkdir(parents=True, exist_ok=True)
    plain = dumps(dict(card), indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    write_atomic(folder / RECORD, (plain + "\n").encode())
    markdown = folder / MARKDOWN
    write_atomic(markdown, card_markdown(card, pictures=_pictures(folder, card)).encode())
    return markdown, write_html_report(markdown, HTML)
