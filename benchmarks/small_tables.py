"""The defaults on small tables: is the bank-alone baseline honest, and does the split reach a pooled regression?

    python benchmarks/small_tables.py [--sizes 1000 3000] [--seeds 0 1 2 3 4] [--presets ...] \
        [--out benchmarks/results-small-tables.json]

Per preset and size (a stratified subsample of the preset's training rows of the bank, the partner's table cut to the
same customers; keys like ``default_credit_1000``) and seed, with :class:`vsplit.SplitClassifier`'s defaults
(``fallback=True``, so the label party also trains its own models and chooses one, as a pilot's report does):

- ``bank_alone``: the bank-alone model the report uses as its baseline (the better on the bank's validation rows of
  its network and its logistic regression, :mod:`vsplit.app.fallback`): its test ``auc``, ``model`` and validation
  AUCs; ``bank_network``: the bank's network alone (the ``label_party_only`` model) on the same rows;
- ``bank_lr``: scikit-learn's logistic regression (one-hot categories, standardized numbers, ``C=1``) on the bank's
  columns, its training rows; ``pooled_lr``: the same on the pooled columns of the customers both parties know;
- ``split``: the defaults (``candidates="auto"``: on these tables the split network blended with the split
  scorecard, the mean of both models' log-odds, :mod:`vsplit.candidates`), with ``candidates_``, what the defaults
  trained; ``split_network``: that same network alone (``candidates="network"``); ``split_scorecard``: that same
  scorecard alone (:class:`vsplit.SplitScorecard`'s defaults); ``gain``: the split's AUC minus the bank-alone model's,
  as the report states it.

Every model is scored on the same test customers: the preset's whole test split restricted to the customers every
party knows (the rows the split scores). ``summary``: ``worst_bank_alone_minus_lr`` (over every subsample and seed),
``worst_split_minus_pooled_lr`` (mean of the seeds per subsample, the worst subsample), the same of the network alone
(``worst_split_network_minus_pooled_lr``), ``broken_baselines`` (how
many subsample-seeds report a baseline at or below 0.55 while ``bank_lr`` is above 0.65). ``meta``: wall time, load.
Training runs in this process, one thread, the parties aligned by a plain join (the same rows as PSI).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PRESETS = ("default_credit", "bank_marketing_no_duration")
SIZES = (1000, 3000)
SEEDS = (0, 1, 2, 3, 4)
RESULTS = Path(__file__).resolve().parent / "results-small-tables.json"
SEARCH = Path(__file__).resolve().parent / "results-small-tables-search.json"
#: a reported baseline at or below this while the bank's regression is above :data:`LR_FLOOR` is broken
BROKEN, LR_FLOOR = 0.55, 0.65


def subsample(name: str, size: int, seed: int) -> tuple[Any, dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Preset ``name`` (split by ``seed``): a stratified ``size``-row sample of the bank's training rows with the
    partner's rows of those customers, and the test tables cut to the customers every party knows."""
    from sklearn.model_selection import train_test_split

    from vsplit.datasets import preset
    from vsplit.evaluation import shared_test_views

    data = preset(name, seed=seed)
    bank = data.train[data.label_party]
    keep, _ = train_test_split(bank, train_size=size, stratify=bank[data.label], random_state=seed)
    ids = set(keep[data.id_column])
    train = {p: t[t[data.id_column].isin(ids)].reset_index(drop=True) for p, t in data.train.items()}
    test = shared_test_views(data.test, label_party=data.label_party, id_column=data.id_column)
    return data, train, test


def logistic_auc(train: pd.DataFrame, test: pd.DataFrame, *, label: str, positive: Any, drop: list[str]) -> float:
    """Test AUC of scikit-learn's logistic regression (one-hot categories, standardized numbers, C=1)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    X = train.drop(columns=[*drop, label])
    text = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    numbers = [c for c in X.columns if c not in text]
    pipe = make_pipeline(ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), text),
                                            ("num", StandardScaler(), numbers)]),
                         LogisticRegression(C=1.0, max_iter=2000))
    pipe.fit(X, (train[label] == positive).astype(int))
    proba = pipe.predict_proba(test.drop(columns=[*drop, label]))[:, 1]
    return float(roc_auc_score((test[label] == positive).astype(int), proba))


def one(name: str, size: int, seed: int, **params: Any) -> dict[str, Any]:
    """Every figure of one subsample and seed (``params``: SplitClassifier parameters to try instead of defaults)."""
    import dataclasses

    from sklearn.metrics import roc_auc_score

    from vsplit import SplitClassifier
    from vsplit.app.fallback import NETWORK, score_bank_only

    data, train, test = subsample(name, size, seed)
    me, ids, label = data.label_party, data.id_column, data.label
    started = time.perf_counter()
    clf = SplitClassifier(label_party=me, label=label, id_column=ids, positive_label=data.positive_label,
                          fallback=True, alignment="join", random_state=seed, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the partner-unknown and key-size notes; the figures say it all
        clf = clf.fit(train)
    seconds = round(time.perf_counter() - started, 2)
    y = (test[me][label] == data.positive_label).astype(int).to_numpy()
    split = clf.evaluate(test)
    network_only = copy.copy(clf)
    network_only.scorecard_ = None  # the same network, alone: what candidates="network" trains
    network = network_only.evaluate(test)
    card = clf.scorecard_.evaluate(test) if clf.scorecard_ is not None else {"auc": float("nan")}
    bank = clf.fallback_
    alone = float(roc_auc_score(y, score_bank_only(bank, test[me])))
    bank_network = float(roc_auc_score(y, score_bank_only(dataclasses.replace(bank, chosen=NETWORK), test[me])))
    pooled_train = data.pooled("train").merge(train[me][[ids]], on=ids)
    pooled_test = data.pooled("test").merge(test[me][[ids]], on=ids)
    lr = {"label": label, "positive": data.positive_label, "drop": [ids]}
    return {
        "bank_alone": {"auc": round(alone, 4), "model": bank.chosen,
                       "val_auc": {k: round(v, 4) for k, v in bank.val_auc.items()}},
        "bank_network": {"auc": round(bank_network, 4), "epochs": len(bank.history)},
        "bank_lr": {"auc": round(logistic_auc(train[me], test[me], **lr), 4)},
        "split": {"auc": round(split["auc"], 4), "n_scored": split["n_scored"], "candidates_": clf.candidates_},
        "split_network": {"auc": round(network["auc"], 4), "n_scored": network["n_scored"],
                          "epochs": len(clf.history_), "batch_size": clf.batch_size_},
        "split_scorecard": {"auc": round(card["auc"], 4)},
        "pooled_lr": {"auc": round(logistic_auc(pooled_train, pooled_test, **lr), 4)},
        "gain": {"auc": round(split["auc"] - alone, 4), "over": bank.chosen},
        "seconds": seconds,
    }


#: ``--search``: the schedules compared on validation rows (the defaults against the fixed batch of 256 before them)
CANDIDATES = {"before (batch 256, patience 5)": {"min_steps": 0}, "defaults": {},
              "defaults, batches of 16": {"batch_size": 16}, "defaults, 20 % validation": {"validation_fraction": 0.2}}


def search(name: str, size: int, seed: int, *, holdout: float = 0.25) -> dict[str, dict[str, float]]:
    """Validation AUC of every schedule of :data:`CANDIDATES` (split and bank-alone network), each trained on a
    stratified ``1 - holdout`` of the subsample and scored on the rest (customers both parties know); no test row is
    read."""
    from sklearn.model_selection import train_test_split

    from vsplit import SplitClassifier

    data, train, _ = subsample(name, size, seed)
    me, ids = data.label_party, data.id_column
    bank = train[me]
    fit_rows, valid_rows = train_test_split(bank, test_size=holdout, stratify=bank[data.label], random_state=seed)
    fit = {p: t[t[ids].isin(set(fit_rows[ids]))].reset_index(drop=True) for p, t in train.items()}
    valid = {p: t[t[ids].isin(set(valid_rows[ids]))].reset_index(drop=True) for p, t in train.items()}
    out: dict[str, dict[str, float]] = {}
    for key, params in CANDIDATES.items():
        for mode in ("split", "label_party_only"):
            clf = SplitClassifier(label_party=me, label=data.label, id_column=ids, positive_label=data.positive_label,
                                  mode=mode, alignment="join", random_state=seed, candidates="network",
                                  **params).fit(fit)
            out.setdefault(key, {})[mode] = round(clf.evaluate(valid)["auc"], 4)
    return out


def full_size_schedules() -> dict[str, dict[str, int]]:
    """For every bundled two-party preset at full size (seed 0): its training rows (the shared customers less the
    10 % validation share) and the batch and patience the defaults fit to them (no training)."""
    from vsplit.app.session import fitted_batch, fitted_patience
    from vsplit.datasets import preset
    from vsplit.models.recipe import RECIPE

    out = {}
    for name in ("bank_marketing", "bank_marketing_no_duration", "secretflow_bank", "default_credit"):
        data = preset(name, seed=0)
        ids = data.id_column
        shared = len(set(data.train[data.label_party][ids]).intersection(*(set(t[ids]) for t in data.train.values())))
        n_train = shared - round(0.1 * shared)
        batch = fitted_batch(None, n_train, RECIPE["min_steps"])
        steps = -(-n_train // batch)
        out[name] = {"training_rows": n_train, "batch_size": batch, "steps_per_epoch": steps,
                     "patience": fitted_patience(RECIPE["patience"], steps, RECIPE["min_steps"])}
    return out


def summarise(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The three figures the targets are set on (module docstring), over ``results[subsample][seed]``."""
    from vsplit.app.fallback import BANK_MODELS

    runs = [r for seeds in results.values() for r in seeds.values()]

    def mean(seeds: dict[str, dict[str, Any]], model: str) -> float:
        return float(np.mean([r[model]["auc"] for r in seeds.values()]))

    per = {key: round(mean(seeds, "split") - mean(seeds, "pooled_lr"), 4) for key, seeds in results.items()}
    network = {key: round(mean(seeds, "split_network") - mean(seeds, "pooled_lr"), 4)
               for key, seeds in results.items()}
    return {
        "worst_bank_alone_minus_lr": round(min(r["bank_alone"]["auc"] - r["bank_lr"]["auc"] for r in runs), 4),
        "worst_split_minus_pooled_lr": min(per.values()),
        "split_minus_pooled_lr": per,
        "worst_split_network_minus_pooled_lr": min(network.values()),
        "split_network_minus_pooled_lr": network,
        "split_trained": {c: sum(r["split"]["candidates_"] == c for r in runs)
                          for c in sorted({r["split"]["candidates_"] for r in runs})},
        "broken_baselines": sum(r["bank_alone"]["auc"] <= BROKEN and r["bank_lr"]["auc"] > LR_FLOOR for r in runs),
        "bank_models_chosen": {m: sum(r["bank_alone"]["model"] == m for r in runs)
                               for m in sorted({*BANK_MODELS, *(r["bank_alone"]["model"] for r in runs)})},
        "mean": {key: {m: round(mean(seeds, m), 4) for m in ("bank_alone", "bank_network", "bank_lr", "split",
                                                               "split_network", "split_scorecard", "pooled_lr",
                                                               "gain")}
                 for key, seeds in results.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--params", default="{}", help="SplitClassifier parameters as JSON, to try instead")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--search", action="store_true", help="compare CANDIDATES on validation rows instead "
                        "(results-small-tables-search.json)")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    if args.search:
        return run_search(args.presets, args.sizes, args.seeds, out=args.out or SEARCH)
    params = json.loads(args.params)
    started, load = time.perf_counter(), os.getloadavg()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name in args.presets:
        for size in args.sizes:
            for seed in args.seeds:
                out = one(name, size, seed, **params)
                results.setdefault(f"{name}_{size}", {})[str(seed)] = out
                shown = ("bank_alone", "bank_network", "bank_lr", "split", "split_network", "pooled_lr")
                print(f"{name}_{size} seed {seed}: " + ", ".join(f"{m} {out[m]['auc']:.4f}" for m in shown)
                      + f" ({out['bank_alone']['model']})",
                      file=sys.stderr, flush=True)
    report = {"params": params, **results, "summary": summarise(results), "full_size": full_size_schedules(),
              "meta": {"seconds": round(time.perf_counter() - started, 1), "load_before": [round(x, 2) for x in load],
                       "load_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}}
    from vsplit.atomic import write_atomic

    write_atomic(args.out or RESULTS, (json.dumps(report, indent=2) + "\n").encode())
    print(json.dumps(report["summary"], indent=2))
    return 0


def run_search(presets: list[str], sizes: list[int], seeds: list[int], *, out: Path) -> int:
    """``--search``: :func:`search` per preset, size and seed, and the mean of the seeds per candidate."""
    from vsplit.atomic import write_atomic

    started, load = time.perf_counter(), os.getloadavg()
    report: dict[str, Any] = {}
    for name in presets:
        for size in sizes:
            per = {str(seed): search(name, size, seed) for seed in seeds}
            print(f"{name}_{size}: {per}", file=sys.stderr, flush=True)
            mean = {key: {mode: round(float(np.mean([r[key][mode] for r in per.values()])), 4) for mode in per[
                str(seeds[0])][key]} for key in CANDIDATES}
            report[f"{name}_{size}"] = {"seeds": per, "mean": mean}
    report["meta"] = {"seconds": round(time.perf_counter() - started, 1), "load_before": [round(x, 2) for x in load],
                      "load_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    write_atomic(out, (json.dumps(report, indent=2) + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
