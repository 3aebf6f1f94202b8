"""How the default recipe was chosen: candidate recipes scored on a validation split of the training rows only.

    python benchmarks/recipe_search.py [--presets bank_marketing secretflow_bank default_credit] [--seed 0]

Each preset's training rows are cut again (a stratified 80/20 of the label party's rows,
:func:`vsplit.tune.rows.validation_views`); every candidate trains on the 80 % (the same network in one place,
which equals the split: tests/test_oracle.py) and is scored on the 20 %. The test rows are never read. Prints one
JSON object: per preset and candidate, the validation AUC, the epochs run and the seconds; ``chosen``: the candidate
with the best mean validation AUC over the presets.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

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


def main() -> int:
    from vsplit.datasets import preset
    from vsplit.estimator import SplitClassifier
    from vsplit.evaluation import shared_test_views
    from vsplit.tune.rows import validation_views

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["bank_marketing", "secretflow_bank", "default_credit"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    args = parser.parse_args()
    report: dict = {}
    for name in args.presets:
        data = preset(name, seed=args.seed)
        fit, valid = validation_views(data.train, label_party=data.label_party, label=data.label, fraction=0.2,
                                      seed=args.seed)
        valid = shared_test_views(valid, label_party=data.label_party, id_column=data.id_column)
        report[name] = {}
        for cand in args.candidates:
            started = time.perf_counter()
            clf = SplitClassifier(label_party=data.label_party, label=data.label, id_column=data.id_column,
                                  positive_label=data.positive_label, mode="centralized", random_state=args.seed,
                                  **CANDIDATES[cand]).fit(fit)
            report[name][cand] = {"val_auc": round(clf.evaluate(valid)["auc"], 4), "epochs": len(clf.history_),
                                  "seconds": round(time.perf_counter() - started, 1)}
            print(name, cand, report[name][cand], file=sys.stderr, flush=True)
    mean = {c: sum(report[p][c]["val_auc"] for p in args.presets) / len(args.presets) for c in args.candidates}
    report["mean_val_auc"] = {c: round(v, 4) for c, v in mean.items()}
    report["chosen"] = max(mean, key=mean.get)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
