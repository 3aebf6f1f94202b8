"""Issue 47's scorecard figures: the ``scorecard`` section of benchmarks/credit_scoring.py (registered there).

    python benchmarks/credit_scoring.py --sections scorecard [--quick] [--key-bits 2048]

  scorecard.<preset>.gini           test Gini (2 AUC - 1, the test rows every party knows) of vsplit.SplitScorecard
                                    (binning across the cut, every attribute of IV >= 0.02 kept, 50 Nesterov steps
                                    on encrypted residuals) for bank_marketing_no_duration, secretflow_bank and
                                    default_credit
  scorecard.<preset>.pooled_gini    the same optimiser on the pooled WOE matrix of the same columns (fit_pooled);
                                    gini_diff and max_coef_diff: how far the split run is from it (fixed point only)
  scorecard.<preset>.sklearn_gini   scikit-learn's unpenalised LogisticRegression on the same pooled WOE columns
                                    (how close 50 steps come to the optimum)
  scorecard.<preset>.bank_only_gini the bank's own scorecard: the same optimiser on the bank's WOE columns only
  scorecard.bank_full.seconds       `vsplit train` with [model] kind = "scorecard" on the bank_marketing preset, the
                                    bank and the partner as two OS processes over mutual TLS: the bank's seconds of
                                    the training stage (binning and PSI apart: bin_seconds, psi_seconds);
                                    wall_seconds: both processes from start to end
  scorecard.load_average            os.getloadavg() at the start and the end (the machine is shared)

``--quick``: 3 presets on their first 3,000 training rows, a 1024-bit key (a smoke run, not the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PRESETS = ("bank_marketing_no_duration", "secretflow_bank", "default_credit")
MIN_IV = 0.02


def _pooled_woe(card: Any, views: dict[str, pd.DataFrame], id_column: str) -> tuple[np.ndarray, np.ndarray]:
    """The pooled WOE matrix of the label party's rows every party knows (its order), and which rows those are."""
    from vsplit.scorecard import columns_from_maps

    bank = views[card.label_party]
    known = np.ones(len(bank), dtype=bool)
    parts = []
    for party in (card.label_party, *card.partners_):
        view = views[party].drop_duplicates(id_column).set_index(views[party][id_column].astype(str).rename(None))
        ids = bank[id_column].astype(str)
        known &= ids.isin(view.index).to_numpy()
        parts.append((party, view, ids))
    matrix = [columns_from_maps(card.maps_[p], v.loc[i[known]].reset_index(drop=True)).matrix() for p, v, i in parts]
    return np.hstack(matrix), known


def one_preset(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """SplitScorecard on ``name`` against the pooled runs of the same WOE columns."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from vsplit import SplitScorecard
    from vsplit.datasets import preset
    from vsplit.scorecard import ScorecardParams, fit_pooled

    data = preset(name, seed=0)
    train, test = dict(data.train), dict(data.test)
    if args.quick:
        keep = set(train[data.label_party][data.id_column].head(3000))
        train = {p: t[t[data.id_column].isin(keep)].reset_index(drop=True) for p, t in train.items()}
    card = SplitScorecard(label=data.label, positive_label=data.positive_label, id_column=data.id_column,
                          categorical=data.categorical, min_iv=MIN_IV, key_bits=args.key_bits,
                          insecure_small_key_for_tests=args.key_bits < 2048, alignment="join", share_names=True)
    begin = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        card.fit(train)
    seconds = time.perf_counter() - begin
    split = card.evaluate(test)
    params = ScorecardParams(iterations=card.iterations, learning_rate=card.learning_rate, l2=card.l2)
    x_train, known_train = _pooled_woe(card, train, data.id_column)
    y_train = (train[data.label_party][data.label].astype(str) == str(data.positive_label)).to_numpy(float)
    y_train = y_train[known_train]
    x_test, known_test = _pooled_woe(card, test, data.id_column)
    y_test = (test[data.label_party][data.label].astype(str) == str(data.positive_label)).to_numpy(float)
    y_test = y_test[known_test]
    coef, intercept = fit_pooled(x_train, y_train, params=params)
    split_coef = np.concatenate([card.coef_[p] for p in (card.label_party, *card.partners_)])
    pooled_gini = 2 * roc_auc_score(y_test, x_test @ coef + intercept) - 1
    lr = LogisticRegression(C=1e12, max_iter=2000).fit(x_train, y_train)
    own = len(card.selected_[card.label_party])
    bank_coef, bank_intercept = fit_pooled(x_train[:, :own], y_train, params=params)
    return {"gini": round(split["gini"], 6), "pooled_gini": round(float(pooled_gini), 6),
            "gini_diff": float(abs(split["gini"] - pooled_gini)),
            "max_coef_diff": float(np.abs(split_coef - coef).max()),
            "intercept_diff": float(abs(card.intercept_ - intercept)),
            "sklearn_gini": round(float(2 * roc_auc_score(y_test, lr.decision_function(x_test)) - 1), 6),
            "bank_only_gini": round(float(2 * roc_auc_score(y_test, x_test[:, :own] @ bank_coef + bank_intercept)
                                          - 1), 6),
            "n_test": int(split["n_scored"]), "n_train": len(y_train),
            "selected": {p: list(a) for p, a in card.selected_.items()},
            "fit_seconds": round(seconds, 3), "key_bits": args.key_bits}


def bank_full(args: argparse.Namespace) -> dict[str, Any]:
    """`vsplit train` with kind = "scorecard", the bank and the partner of bank_marketing over mutual TLS."""
    from boosting import prepare

    from vsplit.pilot.processes import start, wait
    from vsplit.transport.ports import free_ports

    root = Path(tempfile.mkdtemp(prefix="vsplit-scorecard-bench-"))
    configs = prepare(root, 0, sample=3000 if args.quick else 0)
    port = free_ports(1)[0]
    sets = ["output.run_id=scorecard-bank-full", f"output.dir={json.dumps(str(root / 'runs'))}",
            "model.kind=scorecard", f"woe.key_bits={args.key_bits}", f"scorecard.key_bits={args.key_bits}",
            f"woe.select_min_iv={MIN_IV}", f"woe.workers={args.workers}"]
    if args.key_bits < 2048:
        from vsplit.config.boosting import SMALL_KEYS_ENV

        os.environ[SMALL_KEYS_ENV] = "1"
    logs = {p: root / f"{p}-train.out" for p in configs}
    begin = time.perf_counter()
    procs = {}
    for p, c in configs.items():
        link = f"network.listen=127.0.0.1:{port}" if p == "bank" else f"network.dial=127.0.0.1:{port}"
        procs[p] = start(["train", "--config", str(c), *[x for s in [*sets, link] for x in ("--set", s)]],
                         log=logs[p], show=False)
    wait(procs, logs, timeout=3600, step="scorecard training")
    wall = time.perf_counter() - begin
    out = {p: json.loads((root / "runs" / "scorecard-bank-full" / p / "result.json").read_text()) for p in configs}
    bank = out["bank"]
    return {"seconds": bank["seconds"]["train"], "bin_seconds": bank["seconds"].get("bin"),
            "psi_seconds": bank["seconds"].get("psi"), "wall_seconds": round(wall, 3),
            "rows": bank["psi"]["train"]["intersection"], "iterations": bank["iterations"],
            "attributes": {p: o["attributes"] for p, o in out.items()}, "test": bank["test"],
            "key_bits": args.key_bits, "bytes": {p: o["comm"] for p, o in out.items()}}


def scorecard_section(args: argparse.Namespace) -> dict[str, Any]:
    """The ``scorecard`` section: every preset's Gini beside the pooled and bank-only ones, and bank_full's time."""
    load = [round(v, 2) for v in os.getloadavg()]
    out: dict[str, Any] = {name: one_preset(name, args) for name in PRESETS}
    out["bank_full"] = bank_full(args)
    out["load_average"] = {"start": load, "end": [round(v, 2) for v in os.getloadavg()]}
    return out
