"""Test metrics of split training, its baselines and pooled gradient boosting on every preset; prints one JSON object.

    python benchmarks/quality.py [--quick] [--seeds 0 1 2] [--presets ...] [--jobs 2] \
        [--order-categories] [--weight-rule best|one_se] [--out benchmarks/results-quality.json]
    python benchmarks/quality.py --readme    # the README's quality table, from the saved JSON
    python benchmarks/quality.py --quick --presets default_credit --recipe '{"members": 4}'   # try a recipe

Per preset: ``split``, ``centralized``, ``label_party_only`` (SplitClassifier's defaults), the pooled boosters a
validator would run (vsplit.baselines: ``hgb``, HistGradientBoosting with its defaults; ``lightgbm`` and ``xgboost``,
each tuned by 40 Optuna trials on an inner validation split of the training rows; ``catboost``, its defaults
early-stopped there; all refit on every training row), ``best_pooled`` (per seed the booster with the best TEST AUC:
the validator's strongest, chosen in hindsight, so a bar the split has to clear rather than a fair pick; ``of`` counts
which booster it was), ``split_ensemble`` (vsplit.ensemble.SplitEnsemble: the split bag and vertical trees, both
trained on 90 % of the training rows, combined with a weight chosen on the other 10 %, then both refit on every
training row; the trees' parameters chosen on validation rows by the pooled twin, whose winning candidate also scores
the weight's rows: it equals the first-stage split trees, so those are grown once, at the refit), ``split_trees`` (the
ensemble's refitted vertical trees alone: SplitBoostClassifier, 2048-bit OU), ``pooled_ensemble`` and ``pooled_trees``
(the same ensemble trained in one place, ``mode="centralized"``: equal), each the mean of the seeds' metrics, and
``seeds``: every seed's own figures. ``split`` and ``centralized`` are the ensembles' refitted bags: exactly
``SplitBag(**RECIPE)`` on every training row, what vsplit.evaluation.compare trains (not trained twice). Every model
trains on the same training rows and is scored on the same test customers every party knows; ``wins``: the split's AUC
minus the better of ``hgb`` and ``lightgbm`` and minus the bank alone's, the ensemble's minus ``best_pooled``'s, and
the split against the pooled twins. ``--quick`` runs seed 0 only. ``meta`` holds the wall time and the machine load.

Speed (the issue's budget is 30 minutes on 2 cores; ``meta.wall_seconds`` says what a run took): every (preset, seed)
is one job, the longest presets' first, ``--jobs`` (default 2) jobs run at once in worker processes, and each worker
computes with one thread (torch and OpenMP): these networks are small, and two threads per process on a shared machine
ran ~4x slower than one. The parties align their rows with a plain join (``alignment="join"``): the same rows, in the
same sorted-ID order, as PSI gives (tests/test_quality_table.py); PSI's own cost is measured by benchmarks/psi.py.
``split`` still trains as the parties' machines exchanging messages over in-memory channels, and ``centralized`` as
the same network in one place, so ``split`` against ``centralized`` is measured. """

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from vsplit.models.recipe import RECIPE as DEFAULT_RECIPE

DEFAULT_PRESETS = ["bank_marketing_no_duration", "bank_marketing", "secretflow_bank", "default_credit"]
#: the split's recipe, chosen on validation rows of the training rows (benchmarks/recipe_search.py,
#: results-recipe-search.json; docs/models.md): one network is the estimator's and the party config's default
#: recipe (vsplit.models.recipe.RECIPE: piecewise-linear numeric embeddings, wider bottoms and top with dropout,
#: AdamW with weight decay, up to 40 epochs kept at the best validation AUC, patience 5), written out here so the
#: JSON records it; the benchmark trains the mean of 5 independently seeded networks (``networks``:
#: vsplit.bagging.SplitBag, 5 times the training and the cut traffic; 5 had the best validation AUC; refitting each
#: network on all its rows did not beat it; docs/models.md), whose ``"auto"`` numeric embeddings are piecewise-linear
#: and periodic in turn (vsplit.models.recipe.network_numeric: ahead of 5 piecewise networks on validation rows)
RECIPE = {**{k: list(v) if isinstance(v, tuple) else v for k, v in DEFAULT_RECIPE.items()}, "networks": 5}
MODES = ("split", "centralized", "label_party_only")
#: how the benchmark runs every model (not part of the recipe): the same rows as PSI, by a plain join
RUN = {"alignment": "join"}
BOOSTERS = ("hgb", "lightgbm", "xgboost", "catboost")
ENSEMBLES = ("split_ensemble", "split_trees", "pooled_ensemble", "pooled_trees")
MODELS = (*MODES, *BOOSTERS, "best_pooled", *ENSEMBLES)
RESULTS = Path(__file__).resolve().parent / "results-quality.json"
#: a job's length by preset, relative (results-quality-ordered.json: seconds of a seed), to start the longest first
LENGTH = {"bank_marketing": 4, "bank_marketing_no_duration": 3, "default_credit": 2, "secretflow_bank": 1}
TITLES = {
    "bank_marketing_no_duration": "`bank_marketing_no_duration` (UCI bank-full without `duration`: `make demo` data)",
    "bank_marketing": "`bank_marketing` (UCI bank-full, 45,211 rows, leaky `duration`)",
    "secretflow_bank": "`secretflow_bank` (UCI bank, 4,521 rows)",
    "default_credit": "`default_credit` (UCI default of credit card clients, 30,000 rows)",
}


def one_seed(name: str, seed: int, recipe: dict | None = None, *, order_categories: bool = False,
             weight_rule: str = "best") -> dict[str, dict]:
    """Every model of :data:`MODELS` on preset ``name`` with ``seed`` (``recipe``: the split's, default
    :data:`RECIPE`; ``order_categories``: the ensembles' trees may order categories, ``weight_rule``: how they choose
    their weight, SplitEnsemble's options)."""
    from vsplit.baselines import score_boosters
    from vsplit.datasets import preset
    from vsplit.evaluation import compare, shared_test_views

    data = preset(name, seed=seed)
    # split and centralized: the ensembles' refitted bags (SplitBag(**recipe) on every training row, as compare's)
    out = compare(data, modes=("label_party_only",), random_state=seed, **RUN, **(RECIPE if recipe is None else recipe))
    test = shared_test_views(data.test, label_party=data.label_party, id_column=data.id_column)
    out.update(score_boosters(data.train, test, label_party=data.label_party, label=data.label,
                              id_column=data.id_column, positive_label=data.positive_label, seed=seed,
                              kinds=BOOSTERS))
    best = max(BOOSTERS, key=lambda kind: out[kind]["auc"])  # on the TEST rows: the validator's strongest
    out["best_pooled"] = {**{k: v for k, v in out[best].items() if k != "params"}, "of": best}
    out.update(ensembles(data, test, seed, recipe, order_categories=order_categories, weight_rule=weight_rule))
    return {m: out[m] for m in MODELS}


def ensembles(data: object, test: dict, seed: int, recipe: dict | None, *, trees: object = "auto",
              modes: tuple[tuple[str, str], ...] = (("split", "split"), ("pooled", "centralized")),
              order_categories: bool = False, weight_rule: str = "best") -> dict[str, dict]:
    """The split ensemble (``trees="auto"``: the trees' parameters chosen on validation rows) and its pooled twin
    with the same trees' parameters (``modes``: (key prefix, SplitEnsemble mode); tests pass small trees)."""
    from vsplit.ensemble import SplitEnsemble

    network = dict(RECIPE if recipe is None else recipe)
    networks = int(network.pop("networks", 1))
    keys = {"label_party": data.label_party, "label": data.label, "id_column": data.id_column,
            "positive_label": data.positive_label, "random_state": seed, **RUN}
    out: dict[str, dict] = {}
    for prefix, mode in modes:
        started = time.perf_counter()
        ens = SplitEnsemble(networks=networks, trees=trees, mode=mode, order_categories=order_categories,
                            weight_rule=weight_rule, **keys, **network).fit(data.train)
        trees = ens.trees_params_  # the pooled twin takes the parameters the split one chose (before any refit)
        seconds = {k: round(v, 2) for k, v in ens.fit_seconds_.items()}
        out[f"{prefix}_ensemble"] = {**ens.evaluate(test), "seconds": round(time.perf_counter() - started, 2),
                                     "weight": ens.weight_, "networks_seconds": seconds["networks"],
                                     "trees_seconds": seconds["trees"],
                                     "refit_seconds": round(seconds.get("refit_networks", 0)
                                                            + seconds.get("refit_trees", 0), 2),
                                     "validation_auc": {k: round(v, 4) for k, v in ens.validation_auc_.items()}}
        out[f"{prefix}_trees"] = {**ens.trees_.evaluate(test), "seconds": seconds.get("refit_trees", seconds["trees"]),
                                  "trees": len(ens.trees_.model_.trees),
                                  "params": dict(getattr(ens, "refit_trees_params_", ens.trees_params_))}
        if ens.refit:  # the refitted bag is SplitBag(networks, **recipe) on every training row: the split itself
            out[mode] = {**ens.bag_.evaluate(test), "seconds": seconds["refit_networks"],
                         "epochs": len(ens.bag_.history_)}
    return out


def single_threaded(threads: int = 1) -> None:
    """Compute with ``threads`` threads in this process (torch and OpenMP; set before sklearn or lightgbm load), and
    pay torch's one-time import of its compiler (on the first optimizer, ~8 s) before any model is timed."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def _job(job: tuple[str, int, dict | None, int, bool, str]) -> tuple[str, int, dict[str, dict]]:
    name, seed, recipe, threads, order, rule = job
    single_threaded(threads)
    out = one_seed(name, seed, recipe, order_categories=order, weight_rule=rule)
    print(f"{name} seed {seed}: " + ", ".join(f"{m} {out[m]['auc']:.4f}" for m in MODELS), file=sys.stderr, flush=True)
    return name, seed, out


def map_jobs(job: Callable[[Any], Any], todo: list, *, jobs: int) -> list:
    """``job`` of every item of ``todo``, in order, ``jobs`` at a time in spawned worker processes (``jobs <= 1``: in
    this process); ``job`` must be a module-level function (it is pickled by name)."""
    if jobs <= 1:
        return [job(j) for j in todo]
    import multiprocessing

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(job, todo))


def run_all(presets: list[str], seeds: list[int], recipe: dict | None, *, jobs: int, threads: int,
            order_categories: bool = False, weight_rule: str = "best") -> dict[str, dict]:
    """:func:`one_seed` of every preset and seed, ``jobs`` at a time in worker processes; per preset and seed."""
    todo = [(name, seed, recipe, threads, order_categories, weight_rule) for name in presets for seed in seeds]
    # the longest jobs first, so the last ones to finish are short: the two workers end together
    todo.sort(key=lambda job: -LENGTH.get(job[0], 0))
    done = map_jobs(_job, todo, jobs=jobs)
    results: dict[str, dict] = {name: {} for name in presets}
    for name, seed, out in done:
        results[name][seed] = out
    return results


def summarise(per_seed: dict[int, dict[str, dict]]) -> dict:
    """Mean of the seeds' numeric metrics per model, the seeds' own figures, and where the split wins."""
    report: dict = {}
    for model in MODELS:
        keys = [k for k, v in per_seed[min(per_seed)][model].items() if isinstance(v, (int, float))]
        report[model] = {k: round(sum(s[model][k] for s in per_seed.values()) / len(per_seed), 4) for k in keys}
    report["seeds"] = {str(seed): {m: {k: v for k, v in r[m].items()} for m in MODELS}
                       for seed, r in per_seed.items()}
    report["best_pooled"]["of"] = {kind: sum(s["best_pooled"]["of"] == kind for s in per_seed.values())
                                   for kind in BOOSTERS}
    best = max(report["hgb"]["auc"], report["lightgbm"]["auc"])
    seeds = per_seed.values()
    report["wins"] = {"over_best_booster": round(report["split"]["auc"] - best, 4),
                      "over_label_party_only": round(report["split"]["auc"] - report["label_party_only"]["auc"], 4),
                      "split_minus_centralized": round(report["split"]["auc"] - report["centralized"]["auc"], 4),
                      "ensemble_over_best_pooled": round(report["split_ensemble"]["auc"]
                                                         - report["best_pooled"]["auc"], 4),
                      "ensemble_over_best_pooled_seeds": [round(s["split_ensemble"]["auc"] - s["best_pooled"]["auc"], 4)
                                                          for s in seeds],
                      "ensemble_over_split": round(report["split_ensemble"]["auc"] - report["split"]["auc"], 4),
                      "split_trees_minus_pooled_trees": round(report["split_trees"]["auc"]
                                                              - report["pooled_trees"]["auc"], 4),
                      "split_ensemble_minus_pooled_ensemble": round(report["split_ensemble"]["auc"]
                                                                    - report["pooled_ensemble"]["auc"], 4),
                      "ensemble_seconds_over_split": round(report["split_ensemble"]["seconds"]
                                                           / report["split"]["seconds"], 2)}
    return report


def readme_table(results: dict) -> str:
    """The README's quality table (mean test AUC of the seeds) from ``results``: a column for each model some preset
    holds."""
    columns = {"split": "split", "split_ensemble": "split ensemble", "label_party_only": "bank alone",
               "centralized": "same network in one place", "hgb": "HistGradientBoosting", "lightgbm": "LightGBM tuned",
               "xgboost": "XGBoost tuned", "catboost": "CatBoost", "best_pooled": "best pooled (on test)"}
    columns = {m: t for m, t in columns.items() if any(m in results.get(name, {}) for name in TITLES)}
    rows = ["| preset | " + " | ".join(columns.values()) + " |", "| --- |" + " ---: |" * len(columns)]
    for name, title in TITLES.items():
        if name in results:
            r = results[name]
            rows.append(f"| {title} | " + " | ".join(f"{r[m]['auc']:.4f}" if m in r else "" for m in columns) + " |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=DEFAULT_PRESETS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--quick", action="store_true", help="seed 0 only")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here (atomically)")
    parser.add_argument("--readme", action="store_true", help="print the README table from the saved JSON")
    parser.add_argument("--jobs", type=int, default=2, help="(preset, seed) jobs at once, one worker process each")
    parser.add_argument("--threads", type=int, default=1, help="compute threads per worker")
    parser.add_argument("--recipe", type=json.loads, default=None,
                        help="the split's SplitClassifier parameters as JSON (default: RECIPE), to try one")
    parser.add_argument("--order-categories", action="store_true",
                        help="let the ensembles' trees order categories by rate (SplitEnsemble(order_categories=True))")
    parser.add_argument("--weight-rule", default="best", choices=("best", "one_se"),
                        help="how the ensembles choose their weight (SplitEnsemble's weight_rule)")
    args = parser.parse_args()
    if args.readme:
        print(readme_table(json.loads(RESULTS.read_text())))
        return 0
    seeds = [0] if args.quick else args.seeds
    started, load_before = time.perf_counter(), os.getloadavg()
    results = run_all(args.presets, seeds, args.recipe, jobs=args.jobs, threads=args.threads,
                      order_categories=args.order_categories, weight_rule=args.weight_rule)
    report: dict = {name: summarise(results[name]) for name in args.presets}
    report["meta"] = {"seeds": seeds, "recipe": RECIPE if args.recipe is None else args.recipe, "run": RUN,
                      "jobs": args.jobs, "threads": args.threads, "order_categories": args.order_categories,
                      "weight_rule": args.weight_rule, **run_meta(started, load_before)}
    emit(report, args.out)
    return 0


def run_meta(started: float, load_before: tuple[float, ...]) -> dict:
    """The wall time since ``started`` (``time.perf_counter()``), the CPUs and the load before and after."""
    return {"wall_seconds": round(time.perf_counter() - started, 1), "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def emit(report: dict, out: Path | None) -> None:
    """Print ``report`` as JSON and, with ``out``, write it there atomically."""
    text = json.dumps(report, indent=2)
    print(text)
    if out is not None:
        from vsplit.atomic import write_atomic

        write_atomic(out, (text + "\n").encode())


if __name__ == "__main__":
    sys.exit(main())
