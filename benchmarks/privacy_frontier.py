"""The label-defense frontier: every setting tried, its leak (the stronger of norm and direction scoring) against its
cost in test AUC, means over seeds; used by ``benchmarks/privacy_audit.py --frontier``.

A setting is a defense config string, optionally with training-recipe changes after ``@``::

    max_norm+clip_noise:noise_multiplier=0.3
    gap_noise:noise_multiplier=0.6@batch_size=1024,lr=0.002

Its cost is measured against ``none`` with the audit's default recipe, seed by seed (a recipe change that lowers the
undefended AUC does not hide in its own baseline); ``cost_vs_own_recipe`` is against ``none`` with the same recipe
where that was run too (a recipe change that raises the undefended AUC does not pass for a cheap defense). A setting
meets the goal only if its leak and both costs are within it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vsplit.models.recipe import PLAIN
from vsplit.privacy import audit
from vsplit.privacy.defenses.base import _value

#: The goal of issue 28: the stronger label attack at most this leak AUC, for at most this cost in AUC points.
GOAL_LEAK, GOAL_COST_POINTS = 0.60, 1.0

#: what every setting trains unless its recipe says otherwise: the plain network the frontier was measured on
BASE = {k: v for k, v in PLAIN.items() if k not in ("epochs",)}
#: The settings tried by default: the earlier search's best (docs/privacy.md), the new defense, and the recipe changes
#: (20 epochs: the estimator's default, which the audit caps at 10; batch 1024 with a larger learning rate).
DEFAULT_FRONTIER = (
    "none",
    "clip_noise",
    "marvell:power=3",
    "max_norm+clip_noise:noise_multiplier=0.3",
    "max_norm+clip_noise:noise_multiplier=0.5",
    "gap_noise:noise_multiplier=0.8",
    "gap_noise:noise_multiplier=1.2",
    "none@epochs=20",
    "max_norm+clip_noise:noise_multiplier=0.4@epochs=20",
    "max_norm+clip_noise:noise_multiplier=0.5@epochs=20",
    "none@batch_size=1024,lr=0.003",
    "max_norm+clip_noise:noise_multiplier=0.4@batch_size=1024,lr=0.003",
)


#: Recipe keys that take a list of layer widths.
_WIDTHS = ("bottom_hidden", "top_hidden")


def parse_setting(setting: str) -> tuple[str, dict[str, Any]]:
    """The defense config string and the estimator parameters of ``"defense@key=value,..."``.

    >>> parse_setting("gap_noise:noise_multiplier=0.6@batch_size=1024,lr=0.002")
    ('gap_noise:noise_multiplier=0.6', {'batch_size': 1024, 'lr': 0.002})

    Layer widths (``bottom_hidden``, ``top_hidden``) are one width or several joined by ``x``:

    >>> parse_setting("none@bottom_hidden=128,top_hidden=64x32")[1]
    {'bottom_hidden': (128,), 'top_hidden': (64, 32)}
    """
    defense, _, recipe = setting.partition("@")
    params: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in recipe.split(","))):
        key, _, value = item.partition("=")
        key = key.strip()
        params[key] = tuple(int(w) for w in value.split("x")) if key in _WIDTHS else _value(value)
    return defense.strip(), params


def run_frontier(
    preset: str,
    settings: Sequence[str],
    *,
    seeds: int | Sequence[int],
    epochs: int,
    batch_size: int,
    progress: Callable[[str], None],
    cache: Path | None = None,
) -> dict[str, Any]:
    """Audit every setting (label attacks only) over ``seeds`` (a number: seeds 0, 1, ...; or the seeds themselves,
    e.g. held-out seeds 3, 4, 5 for a setting chosen on 0, 1, 2); the frontier's JSON block. With ``cache``, each
    setting's runs are kept there (one file per setting, seeds and recipe) and taken from there when present, so that
    an interrupted or extended search only runs what it has not yet."""
    seeds = _seeds(seeds)
    settings = list(dict.fromkeys([*settings, "none"]))  # the baseline of every cost, run last if not listed
    per_setting: dict[str, list[dict[str, Any]]] = {}
    measured: dict[str, dict[str, Any]] = {}
    cached: list[str] = []
    started = time.perf_counter()
    for setting in settings:
        defense, recipe = parse_setting(setting)
        # the plain network (vsplit.models.recipe.PLAIN, the default until issue 25's recipe) unless the setting's
        # recipe says otherwise: the frontier was measured on it, and its cached runs are keyed by these parameters
        params = {**BASE, "epochs": epochs, "batch_size": batch_size, **recipe}
        key = json.dumps([preset, setting, seeds, params], sort_keys=True)
        kept = cache / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}.json" if cache else None
        if kept is not None and kept.exists():
            record = json.loads(kept.read_text())
            per_setting[setting] = record["runs"]
            measured[setting] = {"finished": record.get("finished"),
                                 "load_average": [round(v, 2) for v in record.get("load_average", [])]}
            cached.append(setting)
            progress(f"[frontier {setting}] from {kept}")
            continue
        report = audit(
            preset, defenses=[defense], seeds=seeds, estimator=params, attacks=("label_leakage",),
            progress=lambda line, s=setting: progress(f"[frontier {s}] {line}"),
        )
        per_setting[setting] = report.runs
        measured[setting] = {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "load_average": [round(v, 2) for v in os.getloadavg()]}
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps({"key": key, "runs": report.runs, **measured[setting]}, default=str))
    baseline = {run["seed"]: run["test_auc"] for run in per_setting["none"]}
    points = []
    for setting, runs in per_setting.items():
        defense, recipe = parse_setting(setting)
        own = per_setting.get(f"none@{setting.partition('@')[2]}") if recipe else per_setting["none"]
        costs = [100 * (baseline[r["seed"]] - r["test_auc"]) for r in runs]
        point = {
            "setting": setting, "defense": defense, "recipe": recipe, "n_seeds": len(runs),
            "test_auc": _mean(r["test_auc"] for r in runs),
            "cost_points": float(np.mean(costs)), "cost_points_per_seed": [round(c, 3) for c in costs],
            "norm_leak_auc": _mean(r["norm_leak_auc"] for r in runs),
            "direction_leak_auc": _mean(r["direction_leak_auc"] for r in runs),
            "leak_auc_chance": _mean(r["leak_auc_chance"] for r in runs),
            "epochs_run": _mean(r["epochs_run"] for r in runs),
            "seed_list": [r["seed"] for r in runs], "measured": measured[setting],
        }
        if own is not None:
            own_auc = {r["seed"]: r["test_auc"] for r in own}
            own_costs = [100 * (own_auc[r["seed"]] - r["test_auc"]) for r in runs]
            point["cost_vs_own_recipe"] = float(np.mean(own_costs))
            point["cost_vs_own_recipe_per_seed"] = [round(c, 3) for c in own_costs]
        point["leak_auc"] = max(point["norm_leak_auc"], point["direction_leak_auc"])
        worst_cost = max(point["cost_points"], point.get("cost_vs_own_recipe", -math.inf))
        point["meets_goal"] = bool(point["leak_auc"] <= GOAL_LEAK and worst_cost <= GOAL_COST_POINTS)
        points.append(point)
    return {
        "preset": preset, "seeds": seeds, "epochs": epochs, "batch_size": batch_size,
        "goal": {"leak_auc_at_most": GOAL_LEAK, "cost_points_at_most": GOAL_COST_POINTS},
        "baseline_test_auc": _mean(baseline.values()),
        "points": points, "pareto": _pareto(points), "meeting_goal": [p["setting"] for p in points if p["meets_goal"]],
        "seconds": round(time.perf_counter() - started, 1),
        "from_cache": cached,  # measured by an earlier run (seconds and load average above are this run's)
    }


def _seeds(seeds: int | Sequence[int]) -> int | list[int]:
    """``seeds`` as the audit takes it: a number for seeds 0 to n - 1 (so the runs cached under a number stay valid),
    else the list of seeds.

    >>> _seeds([0, 1, 2]), _seeds([3, 4, 5]), _seeds(3)
    (3, [3, 4, 5], 3)
    """
    if isinstance(seeds, int):
        return seeds
    listed = [int(s) for s in seeds]
    if not listed or len(set(listed)) != len(listed):
        raise ValueError(f"seeds must be distinct and at least one, got {listed}")
    return len(listed) if listed == list(range(len(listed))) else listed


def _pareto(points: Sequence[dict[str, Any]]) -> list[str]:
    """The settings no other setting beats on both leak and cost."""
    return [
        p["setting"] for p in points
        if not any(q["leak_auc"] <= p["leak_auc"] and q["cost_points"] <= p["cost_points"]
                   and (q["leak_auc"], q["cost_points"]) != (p["leak_auc"], p["cost_points"]) for q in points)
    ]


def merge_frontier(earlier: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new``'s points and the points of ``earlier`` that ``new`` did not measure, with the Pareto front and the
    settings meeting the goal over all of them. Refused unless both measured the same preset, seeds, epochs and batch
    size against the same baseline (the runs are deterministic: the same ``none`` gives the same test AUCs).

    >>> a = {"preset": "p", "seeds": 3, "epochs": 10, "batch_size": 256, "baseline_test_auc": 0.9, "from_cache": [],
    ...      "points": [{"setting": "x", "leak_auc": 0.7, "cost_points": 0.5, "meets_goal": False}]}
    >>> b = {**a, "points": [{"setting": "y", "leak_auc": 0.6, "cost_points": 0.4, "meets_goal": True}]}
    >>> merged = merge_frontier(a, b)
    >>> [p["setting"] for p in merged["points"]], merged["pareto"], merged["kept_from_earlier"]
    (['x', 'y'], ['y'], ['x'])
    """
    same = ("preset", "seeds", "epochs", "batch_size")
    if any(earlier.get(k) != new.get(k) for k in same) or \
            not math.isclose(earlier["baseline_test_auc"], new["baseline_test_auc"], abs_tol=1e-9):
        raise ValueError("the earlier frontier was measured on other settings or another baseline: "
                         f"{ {k: earlier.get(k) for k in (*same, 'baseline_test_auc')} } against "
                         f"{ {k: new.get(k) for k in (*same, 'baseline_test_auc')} }; measure it again")
    ran = {p["setting"] for p in new["points"]}
    kept = [p for p in earlier["points"] if p["setting"] not in ran]
    points = kept + new["points"]
    return {**new, "points": points, "pareto": _pareto(points),
            "meeting_goal": [p["setting"] for p in points if p["meets_goal"]],
            "kept_from_earlier": [p["setting"] for p in kept]}


def _mean(values) -> float:
    finite = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return float(np.mean(finite)) if finite else math.nan


def plot_frontier(frontier: dict[str, Any], path: Path) -> Path:
    """Leak AUC (the stronger attack) against AUC cost, one point per defended setting, the goal's box shaded; a
    setting with another recipe also shows its cost against ``none`` of that recipe (a hollow marker, joined)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 6.5), constrained_layout=True)
    ax.fill_between([-0.5, GOAL_COST_POINTS], 0.45, GOAL_LEAK, color="tab:green", alpha=0.12, label="goal")
    defended = sorted((p for p in frontier["points"] if p["defense"] != "none"), key=lambda p: p["cost_points"])
    for i, p in enumerate(defended):
        color = "tab:red" if p["setting"] in frontier["pareto"] else "tab:blue"
        ax.scatter([p["cost_points"]], [p["leak_auc"]], s=30, color=color, zorder=3)
        own = p.get("cost_vs_own_recipe")
        if p["recipe"] and own is not None and abs(own - p["cost_points"]) > 0.01:
            ax.plot([p["cost_points"], own], [p["leak_auc"]] * 2, color=color, lw=0.8, alpha=0.6)
            ax.scatter([own], [p["leak_auc"]], s=30, facecolors="none", edgecolors=color, zorder=3)
        short = (p["setting"].replace(",warmup_epochs=", " warm-up ").replace(",warmup_noise_multiplier=", " at σ=")
                 .replace("max_norm+clip_noise", "mn+cn").replace("noise_multiplier=", "σ=")
                 .replace("max_norm:orthogonal=true+", "mn⊥+").replace("max_norm:orthogonal=", "mn⊥")
                 .replace("max_norm:centred=true+", "mn centred+").replace("+clip_noise", "+cn")
                 .replace(",orthogonal=true", " ⊥").replace(",orthogonal=", " ⊥")
                 .replace("batch_size=", "batch ").replace(",lr=", " lr ").replace(",centred=true", " centred")
                 .replace(",monitor=val_auc", " val_auc").replace("embedding_width=", "width "))
        ax.annotate(short, (p["cost_points"], p["leak_auc"]), fontsize=6, xytext=(-4, 4 if i % 2 else -9),
                    textcoords="offset points", ha="right")
    for p in (p for p in defended if p["meets_goal"]):  # at its larger cost, where the goal is decided
        worst = max(p["cost_points"], p.get("cost_vs_own_recipe") or -math.inf)
        ax.scatter([worst], [p["leak_auc"]], marker="*", s=220, color="tab:green", edgecolors="black", zorder=4,
                   label=f"meets the goal: {p['setting']}")
    undefended = [p["leak_auc"] for p in frontier["points"] if p["defense"] == "none"]
    chance = _mean(p["leak_auc_chance"] for p in frontier["points"] if "batch_size" not in p["recipe"])
    ax.axhline(chance, color="grey", ls=":", label=f"chance (batch {frontier['batch_size']}): {chance:.3f}")
    ax.scatter([], [], s=30, facecolors="none", edgecolors="tab:blue",
               label="cost against no defense of the same recipe")
    ax.set_xlabel(f"test AUC cost against no defense, 10 epochs, batch {frontier['batch_size']} (points; mean of "
                  "seeds)")
    ax.set_ylabel("leak AUC, the stronger of norm and direction scoring")
    ax.set_title(f"label defenses on {frontier['preset']}: {frontier['seeds']} seeds (red: Pareto front; σ: "
                 f"noise_multiplier; no defense leaks {min(undefended):.2f} to {max(undefended):.2f}, off the chart)",
                 fontsize=9)
    ax.grid(alpha=0.3)
    right = max(max(p["cost_points"], p.get("cost_vs_own_recipe") or 0) for p in defended)
    ax.set_xlim(-0.5, right + 0.2)
    ax.set_ylim(0.5, max(p["leak_auc"] for p in defended) + 0.02)
    ax.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path
