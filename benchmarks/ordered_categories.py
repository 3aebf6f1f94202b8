"""Ordered categories: the vertical trees with each categorical column's codes ordered by the label party's rate
(``order_categories``) against the same trees on the codes as binned, per preset and seed.

The trees are the pooled twin (:class:`vsplit.pooled_trees.PooledBoostClassifier`, equal to the split trees:
tests/test_boosting_order.py and tests/test_boosting_processes.py check it in one process and over mutual TLS),
chosen as the ensemble's ``trees="auto"`` chooses them: every candidate of :data:`vsplit.ensemble.TREE_GRID` with
:data:`vsplit.ensemble.TREE_FIXED`, early-stopped on validation rows of the preset's training rows, the best
validation AUC wins. Three choices per preset and seed, each scored on the shared test customers:

- ``codes``: the grid on the codes as binned (the default);
- ``ordered``: the grid with ``order_categories=True``;
- ``either``: both grids, the best validation AUC of all (what ``SplitEnsemble(order_categories=True)`` picks).

Usage::

    python benchmarks/ordered_categories.py --jobs 2 --out benchmarks/results-ordered-categories.json

prints the JSON: per preset the mean test AUC of each choice over the seeds, the differences to ``codes``, and
each seed's figures (the chosen candidate, its kept trees, its validation and test AUC).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import DEFAULT_PRESETS, RUN, emit, map_jobs, run_meta, single_threaded

CHOICES = ("codes", "ordered", "either")


def one_seed(name: str, seed: int) -> dict:
    """Every candidate of the grid both ways on preset ``name`` with ``seed``; the three choices."""
    from vsplit.datasets import preset
    from vsplit.ensemble import TREE_FIXED, TREE_GRID
    from vsplit.evaluation import shared_test_views
    from vsplit.pooled_trees import PooledBoostClassifier

    data = preset(name, seed=seed)
    test = shared_test_views(data.test, label_party=data.label_party, id_column=data.id_column)
    shared = {"label_party": data.label_party, "label": data.label, "id_column": data.id_column,
              "positive_label": data.positive_label, "random_state": seed, **RUN}
    candidates = []
    for order in (False, True):  # SplitEnsemble's order: the codes' grid first, the first best wins
        for candidate in TREE_GRID:
            started = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                twin = PooledBoostClassifier(**shared, **TREE_FIXED, **candidate, order_categories=order)
                twin.fit(data.train)
                auc = twin.evaluate(test)["auc"]
            candidates.append({**candidate, "order_categories": order,
                               "validation_auc": round(max(twin.evals_result_["validation"]["auc"]), 6),
                               "trees": twin.best_iteration_ + 1, "test_auc": round(auc, 6),
                               "seconds": round(time.perf_counter() - started, 2)})
    return {**choices(candidates), "candidates": candidates}


def choices(candidates: list[dict]) -> dict[str, dict]:
    """The candidate each choice keeps: the best validation AUC among the unordered ones (``codes``), the ordered
    ones (``ordered``) or all (``either``), the first of equals winning as in ``SplitEnsemble``.

    >>> c = [{"order_categories": False, "validation_auc": 0.8}, {"order_categories": True, "validation_auc": 0.8}]
    >>> [choices(c)[k]["order_categories"] for k in CHOICES]
    [False, True, False]
    """
    out = {}
    for choice, allowed in (("codes", (False,)), ("ordered", (True,)), ("either", (False, True))):
        pool = [c for c in candidates if c["order_categories"] in allowed]
        best = pool[0]
        for c in pool[1:]:
            if c["validation_auc"] > best["validation_auc"]:
                best = c
        out[choice] = best
    return out


def _job(job: tuple[str, int]) -> tuple[str, int, dict]:
    name, seed = job
    single_threaded(1)
    out = one_seed(name, seed)
    print(f"{name} seed {seed}: " + ", ".join(f"{c} {out[c]['test_auc']:.4f}" for c in CHOICES), file=sys.stderr,
          flush=True)
    return name, seed, out


def summarise(per_seed: dict[int, dict]) -> dict:
    """Mean test AUC of each choice over the seeds, the differences to ``codes`` (mean, worst, per seed)."""
    seeds = sorted(per_seed)
    report: dict = {c: {"auc": round(sum(per_seed[s][c]["test_auc"] for s in seeds) / len(seeds), 4)}
                    for c in CHOICES}
    for c in ("ordered", "either"):
        gains = [per_seed[s][c]["test_auc"] - per_seed[s]["codes"]["test_auc"] for s in seeds]
        report[f"{c}_minus_codes"] = {"mean": round(sum(gains) / len(gains), 4), "worst": round(min(gains), 4),
                                      "per_seed": [round(g, 4) for g in gains]}
    report["either_picked_ordered"] = sum(per_seed[s]["either"]["order_categories"] for s in seeds)
    report["seeds"] = {str(s): per_seed[s] for s in seeds}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=DEFAULT_PRESETS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="(preset, seed) jobs at once, one worker process each")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here (atomically)")
    args = parser.parse_args()
    started, load_before = time.perf_counter(), os.getloadavg()
    done = map_jobs(_job, [(name, seed) for name in args.presets for seed in args.seeds], jobs=args.jobs)
    results: dict[str, dict[int, dict]] = {name: {} for name in args.presets}
    for name, seed, out in done:
        results[name][seed] = out
    report: dict = {name: summarise(results[name]) for name in args.presets}
    report["meta"] = {"seeds": args.seeds, "jobs": args.jobs, "threads": 1, "run": RUN,
                      **run_meta(started, load_before)}
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
