"""Compare, in one process, split training with its two baselines (the bank alone, the pooled data) on a preset.

Example:
    vsplit compare
    vsplit compare --preset default_credit --epochs 10

Not `make demo` (which runs the pilot: each party its own process over mutual TLS). The bank and the partner each
hold their own columns of a bundled data set (see datasets/README.md); all three models are scored on the test
customers both organizations know. The default preset, bank_marketing_no_duration, leaves out `duration` (known
only after the call); bank_marketing keeps it and leaks the label: a benchmark setting only.
"""

from __future__ import annotations

import argparse
import json

NAME = "compare"
HELP = "split vs. bank alone vs. pooled on a bundled preset, in one process (not `make demo`)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="bank_marketing_no_duration",
                        help="bundled preset (default: bank_marketing_no_duration)")
    parser.add_argument("--epochs", type=int, default=20, help="maximum epochs (early stopping on validation AUC)")
    parser.add_argument("--seed", type=int, default=0, help="the seed every random choice derives from")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")


def run(args: argparse.Namespace) -> int:
    from vsplit.datasets import preset
    from vsplit.evaluation import compare

    data = preset(args.preset, seed=args.seed)
    results = compare(data, epochs=args.epochs, random_state=args.seed, progress=not args.json)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"\n{data.name}: test metrics on the customers both parties know ({results['split']['n_scored']} rows)")
    print(f"{'model':<20}{'AUC':>8}{'KS':>8}{'F1':>8}{'log loss':>10}{'seconds':>9}")
    labels = {"split": "split (bank+partner)", "label_party_only": "bank alone", "centralized": "centralized (pooled)"}
    for mode, m in results.items():
        print(f"{labels[mode]:<20}{m['auc']:>8.4f}{m['ks']:>8.4f}{m['f1']:>8.4f}{m['log_loss']:>10.4f}{m['seconds']:>9.1f}")
    return 0
