"""Test metrics of split training, its baselines and pooled gradient boosting on every preset; prints one JSON object.

    python benchmarks/quality.py [--quick] [--seeds 0 1 2] [--presets ...] [--out benchmarks/results-quality.json]
    python benchmarks/quality.py --readme    # the README's quality table, from the saved JSON
    python benchmarks/quality.py --quick --presets default_credit --recipe '{"members": 4}'   # try a recipe

Per preset: ``split``, ``centralized``, ``label_party_only`` (SplitClassifier's defaults), ``hgb``
(HistGradientBoosting, defaults) and ``lightgbm`` (tuned on an inner validation split of the training rows), each
the mean of the seeds' metrics, and ``seeds``: every seed's own figures. Every model trains on the same training
rows and is scored on the same test customers every party knows; ``wins``: the split's AUC minus the better
booster's and minus the bank alone's. ``--quick`` runs seed 0 only. ``meta`` holds the wall time and the machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

DEFAULT_PRESETS = ["bank_marketing_no_duration", "bank_marketing", "secretflow_bank", "default_credit"]
#: the split's recipe: SplitClassifier's defaults with piecewise-linear numeric embeddings (docs/models.md)
RECIPE = {"numeric_embedding": "piecewise"}
MODES = ("split", "centralized", "label_party_only")
MODELS = (*MODES, "hgb", "lightgbm")
RESULTS = Path(__file__).resolve().parent / "results-quality.json"
TITLES = {
    "bank_marketing_no_duration": "`bank_marketing_no_duration` (UCI bank-full without `duration`; `make demo`)",
    "bank_marketing": "`bank_marketing` (UCI bank-full, 45,211 rows, leaky `duration`)",
    "secretflow_bank": "`secretflow_bank` (UCI bank, 4,521 rows)",
    "default_credit": "`default_credit` (UCI default of credit card clients, 30,000 rows)",
}


def one_seed(name: str, seed: int, recipe: dict | None = None) -> dict[str, dict]:
    """Every model of :data:`MODELS` on preset ``name`` with ``seed`` (``recipe``: the split's, default
    :data:`RECIPE`)."""
    from vsplit.boosting import score_boosters
    from vsplit.datasets import preset
    from vsplit.evaluation import compare, shared_test_views

    data = preset(name, seed=seed)
    out = compare(data, modes=MODES, random_state=seed, **(RECIPE if recipe is None else recipe))
    test = shared_test_views(data.test, label_party=data.label_party, id_column=data.id_column)
    out.update(score_boosters(data.train, test, label_party=data.label_party, label=data.label,
                              id_column=data.id_column, positive_label=data.positive_label, seed=seed))
    return out


def summarise(per_seed: dict[int, dict[str, dict]]) -> dict:
    """Mean of the seeds' numeric metrics per model, the seeds' own figures, and where the split wins."""
    report: dict = {}
    for model in MODELS:
        keys = [k for k, v in per_seed[min(per_seed)][model].items() if isinstance(v, (int, float))]
        report[model] = {k: round(sum(s[model][k] for s in per_seed.values()) / len(per_seed), 4) for k in keys}
    report["seeds"] = {str(seed): {m: {k: v for k, v in r[m].items()} for m in MODELS}
                       for seed, r in per_seed.items()}
    best = max(report["hgb"]["auc"], report["lightgbm"]["auc"])
    report["wins"] = {"over_best_booster": round(report["split"]["auc"] - best, 4),
                      "over_label_party_only": round(report["split"]["auc"] - report["label_party_only"]["auc"], 4),
                      "split_minus_centralized": round(report["split"]["auc"] - report["centralized"]["auc"], 4)}
    return report


def readme_table(results: dict) -> str:
    """The README's quality table (mean test AUC of the seeds) from ``results``."""
    rows = ["| preset | split | bank alone | same network in one place | HistGradientBoosting | LightGBM tuned |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, title in TITLES.items():
        if name in results:
            r = results[name]
            rows.append(f"| {title} | " + " | ".join(f"{r[m]['auc']:.4f}" for m in (
                "split", "label_party_only", "centralized", "hgb", "lightgbm")) + " |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=DEFAULT_PRESETS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--quick", action="store_true", help="seed 0 only")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here (atomically)")
    parser.add_argument("--readme", action="store_true", help="print the README table from the saved JSON")
    parser.add_argument("--recipe", type=json.loads, default=None,
                        help="the split's SplitClassifier parameters as JSON (default: RECIPE), to try one")
    args = parser.parse_args()
    if args.readme:
        print(readme_table(json.loads(RESULTS.read_text())))
        return 0
    seeds = [0] if args.quick else args.seeds
    started, load_before = time.perf_counter(), os.getloadavg()
    report: dict = {}
    for name in args.presets:
        per_seed = {}
        for seed in seeds:
            per_seed[seed] = one_seed(name, seed, args.recipe)
            print(f"{name} seed {seed}: " + ", ".join(f"{m} {per_seed[seed][m]['auc']:.4f}" for m in MODELS),
                  file=sys.stderr, flush=True)
        report[name] = summarise(per_seed)
    report["meta"] = {"seeds": seeds, "recipe": RECIPE if args.recipe is None else args.recipe,
                      "wall_seconds": round(time.perf_counter() - started, 1), "cpus": os.cpu_count(),
                      "load_before": [round(x, 2) for x in load_before],
                      "load_after": [round(x, 2) for x in os.getloadavg()]}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        from vsplit.atomic import write_atomic

        write_atomic(args.out, (text + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
