"""The feature-leak defenses' default strengths on the default network: test AUC cost against protection from feature
reconstruction; prints one JSON object.

    python benchmarks/feature_defenses.py [--seeds 0 1 2] [--out benchmarks/results-feature-defenses.json]

The setting of ``tests/test_privacy_defenses.py``: its synthetic set of 4,000 imbalanced customers (a bank, and a
partner with 6 numeric columns), 20 epochs of batch 256 at a learning rate of 3e-3, everything else
``SplitClassifier``'s defaults (the default recipe, ``vsplit.models.recipe.RECIPE``). For each training seed:
``none``, then ``embedding_noise`` and ``nopeek`` at their default strengths and at the strengths that were the
defaults on the plain network (``noise_multiplier=0.3``, ``weight=1``), each attacked by the bank's reconstruction
of the partner's columns from the embeddings (a decoder fitted on 200 rows it knows; ``vsplit.privacy.audit``).

Per setting: ``test_auc``, ``cost`` (``none``'s test AUC minus the setting's, same seed), ``reconstruction_r2``
(mean over the columns, from training embeddings), ``reconstruction_r2_max`` (the best-recovered column) and
``reconstruction_r2_scoring`` (from the embeddings sent for scoring): each the mean over the seeds, with ``max_cost``
and ``by_seed`` (every seed's figures). ``meta`` holds the wall time and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from vsplit.atomic import write_atomic

RESULTS = Path(__file__).resolve().parent / "results-feature-defenses.json"
#: the privacy tests' training (tests/test_privacy_defenses.py, TRAINING)
TRAINING = {"epochs": 20, "batch_size": 256, "lr": 3e-3}
SETTINGS = ("none", "embedding_noise", "nopeek", "embedding_noise:noise_multiplier=0.3", "nopeek:weight=1")
KEYS = ("test_auc", "reconstruction_r2", "reconstruction_r2_max", "reconstruction_r2_scoring")


def measure(seeds: list[int]) -> dict:
    """Every setting of :data:`SETTINGS` for every seed; the report (without ``meta``)."""
    import torch

    from vsplit.privacy.audit import AuditData, run_once
    from vsplit.privacy.synthetic import make_imbalanced_views, split_views

    torch.set_num_threads(1)
    train, test = split_views(make_imbalanced_views(4000, seed=0), seed=0)
    data = AuditData(name="synthetic", train=train, test=test, label_party="bank", label="y", positive_label=1)
    runs: dict[str, dict[int, dict]] = {s: {} for s in SETTINGS}
    for seed in seeds:
        for setting in SETTINGS:
            run = run_once(data, setting, seed=seed, estimator=TRAINING, attacks=("reconstruction",))
            runs[setting][seed] = {k: round(float(run[k]), 4) for k in KEYS} | {"epochs_run": run["epochs_run"]}
    report: dict = {}
    for setting, by_seed in runs.items():
        for seed, figures in by_seed.items():
            figures["cost"] = round(runs["none"][seed]["test_auc"] - figures["test_auc"], 4)
        report[setting] = {k: round(statistics.fmean(f[k] for f in by_seed.values()), 4) for k in (*KEYS, "cost")}
        report[setting]["max_cost"] = max(f["cost"] for f in by_seed.values())
        report[setting]["by_seed"] = {str(s): f for s, f in by_seed.items()}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    report = measure(args.seeds)
    report["meta"] = {"seeds": args.seeds, "training": TRAINING, "wall_seconds": round(time.perf_counter() - started),
                      "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}
    text = json.dumps(report, indent=2)
    write_atomic(args.out, (text + "\n").encode())
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
