"""How much the ensemble's weight can buy, and how much each rule for choosing it buys; prints one JSON object.

    python benchmarks/ensemble_weights.py [--seeds 0 1 2] [--presets ...] [--jobs 2] \
        [--out benchmarks/results-ensemble-weights.json]

Per preset and seed, exactly the first stage of :class:`vsplit.ensemble.SplitEnsemble` (``refit=False``): the bag of
benchmarks/quality.py's recipe and the trees (``trees="auto"``), both trained on the training rows less the 10 % set
aside for the weight, in one place (``mode="centralized"``, which equals the split ensemble on the same rows and seeds:
tests/test_ensemble.py; it is only faster here). Both parts then score the set-aside rows and the test customers, and
every rule below picks a weight from the set-aside rows alone; ``rules`` holds each rule's weight and its TEST AUC:

* ``best``: the ensemble's own rule (:func:`vsplit.ensemble.choose_weight`: the best AUC on the set-aside rows);
* ``half``: 0.5 whatever the rows say; ``networks``: 1.0 (the bag alone);
* ``log_loss``: the weight of the best log loss there;
* ``one_se``: the weight nearest 0.5 whose AUC there is within one standard error of the best weight's (the
  standard error of the difference, from 200 paired bootstrap resamples of the set-aside rows): keep the equal blend
  unless the rows show it worse.

``--order-categories``: the trees order categories (SplitEnsemble's option).

``oracle`` is the weight with the best TEST AUC, chosen in hindsight: no rule can do better with these two parts, so
``oracle_over_networks`` bounds what combining them can add to the bag. ``summary``: per rule, the mean and the
smallest gain over the bag alone across every preset and seed, and in how many runs it is above or below the bag
(``--summarise JSON`` recomputes it from a saved run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import DEFAULT_PRESETS, RECIPE, RUN, map_jobs, single_threaded

RESULTS = Path(__file__).resolve().parent / "results-ensemble-weights.json"
RULES = ("best", "half", "networks", "log_loss", "one_se")


def weights_of(y, networks, trees) -> dict[str, float]:
    """Each rule's weight, from the set-aside rows' labels and both parts' log-odds there."""
    import numpy as np
    from sklearn.metrics import log_loss

    from vsplit.ensemble import WEIGHTS, choose_weight

    losses = {w: log_loss(y, 1 / (1 + np.exp(-(w * networks + (1 - w) * trees))), labels=[0, 1]) for w in WEIGHTS}
    return {"best": choose_weight(y, networks, trees)[0], "half": 0.5, "networks": 1.0,
            "log_loss": min(losses, key=lambda w: (losses[w], -w)), "one_se": one_se(y, networks, trees)}


def one_se(y, networks, trees) -> float:
    """The ensemble's ``weight_rule="one_se"`` (:func:`vsplit.ensemble.choose_weight`), its bootstrap seeded 0."""
    from vsplit.ensemble import choose_weight

    return choose_weight(y, networks, trees, rule="one_se", seed=0)[0]


def one_seed(name: str, seed: int, order_categories: bool = False) -> dict:
    """The first stage of the ensemble on preset ``name`` with ``seed`` (``order_categories``: the trees'), and every
    rule's weight and test AUC."""
    from sklearn.metrics import roc_auc_score

    from vsplit.datasets import preset
    from vsplit.ensemble import WEIGHTS, SplitEnsemble
    from vsplit.evaluation import shared_test_views

    started = time.perf_counter()
    data = preset(name, seed=seed)
    test = shared_test_views(data.test, label_party=data.label_party, id_column=data.id_column)
    network = dict(RECIPE)
    keys = {"label_party": data.label_party, "label": data.label, "id_column": data.id_column,
            "positive_label": data.positive_label, "random_state": seed, **RUN}
    ens = SplitEnsemble(networks=int(network.pop("networks")), trees="auto", mode="centralized", refit=False,
                        order_categories=order_categories, **keys, **network).fit(data.train)
    _, held = ens.set_aside(data.train)  # the rows the ensemble chose its weight on
    y, nets, trees, known = ens._parts(held)
    chosen = weights_of(y[known], nets[known], trees[known])
    if chosen["best"] != ens.weight_:
        raise AssertionError(f"{name} seed {seed}: the set-aside rows differ from the ensemble's")
    yt, tn, tt, kt = ens._parts(test)
    yt, tn, tt = yt[kt], tn[kt], tt[kt]
    auc = {w: float(roc_auc_score(yt, w * tn + (1 - w) * tt)) for w in WEIGHTS}
    oracle = max(auc, key=lambda w: (round(auc[w], 12), -abs(w - 0.5)))
    return {"networks_auc": round(auc[1.0], 4), "trees_auc": round(auc[0.0], 4),
            "rules": {r: {"weight": w, "auc": round(auc[w], 4)} for r, w in chosen.items()},
            "oracle": {"weight": oracle, "auc": round(auc[oracle], 4)},
            "oracle_over_networks": round(auc[oracle] - auc[1.0], 4),
            "set_aside_rows": int(known.sum()), "test_rows": len(yt),
            "seconds": round(time.perf_counter() - started, 1)}


def _job(job: tuple[str, int, bool]) -> tuple[str, int, dict]:
    single_threaded(1)
    name, seed, order = job
    out = one_seed(name, seed, order)
    print(f"{name} seed {seed}: " + json.dumps(out), file=sys.stderr, flush=True)
    return name, seed, out


def summarise(results: dict[str, dict[int, dict]]) -> dict:
    """Per rule (and the oracle), the mean and the smallest test-AUC gain over the bag alone, over every run."""
    runs = [r for per_seed in results.values() for r in per_seed.values()]
    out = {}
    for rule in (*[r for r in RULES if all(r in run["rules"] for run in runs)], "oracle"):  # an older run: its rules
        gains = [(r["oracle"] if rule == "oracle" else r["rules"][rule])["auc"] - r["networks_auc"] for r in runs]
        out[rule] = {"mean_over_networks": round(sum(gains) / len(gains), 4), "min_over_networks": round(min(gains), 4),
                     "runs_better": sum(g > 0 for g in gains), "runs_worse": sum(g < 0 for g in gains),
                     "runs": len(gains)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--presets", nargs="+", default=DEFAULT_PRESETS)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--order-categories", action="store_true", help="the trees order categories by rate")
    parser.add_argument("--out", type=Path, default=None, help=f"also write the JSON here (e.g. {RESULTS.name})")
    parser.add_argument("--summarise", type=Path, default=None, metavar="JSON",
                        help="recompute the summary of a saved run's JSON in place (no training)")
    args = parser.parse_args()
    if args.summarise is not None:
        saved = json.loads(args.summarise.read_text())
        runs = {k: v for k, v in saved.items() if k not in ("summary", "meta")}
        saved["summary"] = summarise(runs)
        _write(args.summarise, json.dumps(saved, indent=2))
        print(json.dumps(saved["summary"], indent=2))
        return 0
    import os

    load_before = list(os.getloadavg())
    started = time.perf_counter()
    done = map_jobs(_job, [(p, s, args.order_categories) for p in args.presets for s in args.seeds],
                    jobs=args.jobs)
    results: dict[str, dict[int, dict]] = {p: {} for p in args.presets}
    for name, seed, out in done:
        results[name][seed] = out
    report = {**results, "summary": summarise(results),
              "meta": {"seeds": args.seeds, "jobs": args.jobs, "order_categories": args.order_categories,
                       "wall_seconds": round(time.perf_counter() - started, 1),
                       "load_before": [round(v, 2) for v in load_before],
                       "load_after": [round(v, 2) for v in os.getloadavg()]}}
    text = json.dumps(report, indent=2)
    if args.out is not None:
        _write(args.out, text)
    print(text)
    return 0


def _write(path: Path, text: str) -> None:
    from vsplit.atomic import write_atomic

    write_atomic(path, (text + "\n").encode())


if __name__ == "__main__":
    raise SystemExit(main())
