"""Test metrics of split training and its baselines on every preset; prints one JSON object.

    python benchmarks/quality.py [--presets bank_marketing secretflow_bank default_credit] [--seed 0]

Output: {"bank_marketing": {"split": {"auc": ..., "ks": ..., ...}, "label_party_only": {...}, "centralized": {...}},
...}. Default settings of SplitClassifier, a fixed stratified 80/20 split per preset (secretflow_bank: SecretFlow's
own unstratified split), metrics on the test customers every party knows.
"""

from __future__ import annotations

import argparse
import json
import sys

from vsplit.datasets import preset
from vsplit.evaluation import compare

DEFAULT_PRESETS = ["bank_marketing", "secretflow_bank", "default_credit"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=DEFAULT_PRESETS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    report = {}
    for name in args.presets:
        results = compare(preset(name, seed=args.seed), random_state=args.seed)
        report[name] = {mode: {k: round(v, 4) if isinstance(v, float) else v for k, v in m.items()}
                        for mode, m in results.items()}
        print(f"{name}: " + ", ".join(f"{mode} auc {m['auc']:.4f}" for mode, m in results.items()), file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
