"""How the default recipe was chosen: candidate recipes scored on a validation split of the training rows only.

    python benchmarks/recipe_search.py [--presets bank_marketing secretflow_bank default_credit] [--seeds 0 1 2]
        [--candidates NAME ...] [--recipe 'NAME={"lr": 2e-3}' ...] [--jobs 2]

Each preset's training rows are cut again (a stratified 80/20 of the label party's rows,
:func:`vsplit.tune.rows.validation_views`); every candidate trains on the 80 % (the same network in one place,
which equals the split: tests/test_oracle.py) and is scored on the 20 %; the choice never reads the test rows. Prints
one JSON object: per preset and candidate, the validation AUC (mean of the seeds; ``seeds``: each seed's), the
epochs run and the seconds; ``chosen``: the candidate with the best mean validation AUC over the presets.
``test_auc``: the same fitted model scored on the preset's test rows after the fit, recorded for the report only
(the choice does not look at it). A candidate's ``"bag": k`` averages the probabilities of ``k`` networks fitted
with seeds ``seed + 1000 * i`` (``k`` independent split networks, :class:`vsplit.bagging.SplitBag`: ``k`` times the
cut traffic; as there, ``numeric_embedding`` ``"auto"``, the default, takes piecewise-linear and periodic in turn,
:func:`vsplit.models.recipe.network_numeric`, and a kind named explicitly is every network's);
``val_auc_by_networks`` and ``test_auc_by_networks`` then give the bag of the first 1, 2, ... ``k`` of those
networks. ``"refit": true`` fits each network again on all its training rows (here the 80 %) for the epoch
count its own validation rows chose (``SplitBag(refit=True)``, :func:`vsplit.bagging.fit_network`). Runs like
benchmarks/quality.py: one job per (preset, seed, candidate), ``--jobs`` single-threaded worker processes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import RUN, single_threaded

#: the candidates: SplitClassifier parameters over today's defaults
PW = {"numeric_embedding": "piecewise"}
CANDIDATES: dict[str, dict] = {
    "before (no numeric embedding)": {"numeric_embedding": "none"},
    "piecewise": PW,
    "piecewise, adamw 1e-4": {**PW, "optimizer": "adamw", "weight_decay": 1e-4},
    "piecewise, dropout 0.1": {**PW, "dropout": 0.1},
    "periodic": {"numeric_embedding": "periodic"},
    "piecewise, 4 members": {**PW, "members": 4},
    "piecewise, val_auc, 40 epochs, patience 5": {**PW, "monitor": "val_auc", "epochs": 40, "patience": 5},
    "piecewise, 32 bins, width 16": {**PW, "numeric_bins": 32, "numeric_width": 16},
    "piecewise, bottom 128, top 64": {**PW, "bottom_hidden": (128,), "top_hidden": (64,)},
    "piecewise, lr 3e-4, 60 epochs, patience 5": {**PW, "lr": 3e-4, "epochs": 60, "patience": 5},
    "piecewise, dropout 0.1, adamw 1e-4, val_auc, 40 epochs, patience 5": {
        **PW, "dropout": 0.1, "optimizer": "adamw", "weight_decay": 1e-4, "monitor": "val_auc", "epochs": 40,
        "patience": 5},
}


def bagged_auc(models: list, views: dict, data) -> list[float]:
    """The AUC on ``views`` of the mean positive-class probability of the first 1, 2, ... ``len(models)`` models."""
    from sklearn.metrics import roc_auc_score

    if len(models) == 1:
        return [models[0].evaluate(views)["auc"]]
    p = np.cumsum([m.predict_proba(views)[:, 1] for m in models], axis=0) / np.arange(1, len(models) + 1)[:, None]
    y = (views[data.label_party][data.label] == models[0].classes_[1]).to_numpy()
    return [float(roc_auc_score(y, row)) for row in p]


def score(job: tuple[str, int, str, dict]) -> tuple[str, int, str, dict]:
    """One candidate's validation AUC on one preset and seed (trained on 80 % of the training rows)."""
    name, seed, cand, params = job
    single_threaded()
    from vsplit.bagging import SEED_STRIDE, fit_network
    from vsplit.datasets import preset
    from vsplit.estimator import SplitClassifier
    from vsplit.evaluation import shared_test_views
    from vsplit.models.recipe import RECIPE, network_numeric
    from vsplit.tune.rows import validation_views

    data = preset(name, seed=seed)
    fit, valid = validation_views(data.train, label_party=data.label_party, label=data.label, fraction=0.2,
                                  seed=seed)
    valid = shared_test_views(valid, label_party=data.label_party, id_column=data.id_column)
    test = shared_test_views(data.test, label_party=data.label_party, id_column=data.id_column)
    params = dict(params)
    bag, refit = int(params.pop("bag", 1)), bool(params.pop("refit", False))
    kind = params.pop("numeric_embedding", RECIPE["numeric_embedding"])
    started = time.perf_counter()
    models = [fit_network(SplitClassifier(label_party=data.label_party, label=data.label, id_column=data.id_column,
                                          positive_label=data.positive_label, mode="centralized",
                                          random_state=seed + SEED_STRIDE * i,
                                          numeric_embedding=network_numeric(kind, i), **RUN, **params),
                          fit, refit=refit)[0]
              for i in range(bag)]
    seconds = round(time.perf_counter() - started, 1)
    val, tst = bagged_auc(models, valid, data), bagged_auc(models, test, data)
    out = {"val_auc": val[-1], "test_auc": tst[-1], "epochs": sum(len(m.history_) for m in models) / bag,
           "seconds": seconds}
    if bag > 1:  # the bags of the first k networks, k = 1 .. bag (the same fits)
        out.update({"val_auc_by_networks": val, "test_auc_by_networks": tst})
    print(name, seed, cand, out, file=sys.stderr, flush=True)
    return name, seed, cand, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["bank_marketing", "secretflow_bank", "default_credit"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--candidates", nargs="*", default=None, help="names of CANDIDATES (default: all)")
    parser.add_argument("--recipe", nargs="*", default=[], help="more candidates, each NAME=JSON")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    candidates = {c: CANDIDATES[c] for c in (CANDIDATES if args.candidates is None else args.candidates)}
    for item in args.recipe:
        cand, _, params = item.partition("=")
        candidates[cand] = json.loads(params)
    todo = [(n, s, c, p) for n in args.presets for s in args.seeds for c, p in candidates.items()]
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(score, todo))
    report: dict = {n: {c: {"seeds": {}} for c in candidates} for n in args.presets}
    for name, seed, cand, out in done:
        report[name][cand]["seeds"][str(seed)] = out
    for name in args.presets:
        for entry in report[name].values():
            runs = entry["seeds"].values()
            entry.update({k: round(sum(r[k] for r in runs) / len(runs), 4) for k in ("val_auc", "test_auc", "epochs",
                                                                             "seconds")})
    mean = {c: sum(report[p][c]["val_auc"] for p in args.presets) / len(args.presets) for c in candidates}
    report["mean_val_auc"] = {c: round(v, 4) for c, v in mean.items()}
    report["chosen"] = max(mean, key=mean.get)
    report["recipes"] = candidates
    report["seeds"] = args.seeds
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
