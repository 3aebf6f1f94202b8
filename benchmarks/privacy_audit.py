"""Privacy audit benchmark: every attack against no defense and each defense, on the bundled presets.

    .venv/bin/python benchmarks/privacy_audit.py                      # bank_marketing and default_credit, 3 seeds
    .venv/bin/python benchmarks/privacy_audit.py --epochs 5 --seeds 1 --presets default_credit --out /tmp/audit

Prints one JSON object: preset name -> the audit's rows (one per defense setting, means over seeds), plus the
settings used. With --out, each preset's report (report.md, report.json, privacy_utility.png) goes to OUT/PRESET/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from vsplit.privacy import DEFAULT_AUDIT_DEFENSES, audit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["bank_marketing", "default_credit"])
    parser.add_argument("--defenses", nargs="+", default=list(DEFAULT_AUDIT_DEFENSES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10, help="at most this many epochs (early stopping applies)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the models are tiny: 1 is fastest)")
    parser.add_argument("--out", default=None, help="write each preset's report under OUT/PRESET/")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result: dict[str, object] = {
        "settings": {
            "seeds": args.seeds, "epochs": args.epochs, "batch_size": args.batch_size, "defenses": args.defenses,
            "known_labels": [40, 200], "aux_rows": 200, "torch": torch.__version__,
        }
    }
    for name in args.presets:
        started = time.perf_counter()
        report = audit(
            name, defenses=args.defenses, seeds=args.seeds, epochs=args.epochs, batch_size=args.batch_size,
            progress=lambda line, name=name: print(f"[{name}] {line}", file=sys.stderr, flush=True),
        )
        if args.out:
            report.write(f"{args.out}/{name}")
        print(f"[{name}]\n{report.table()}", file=sys.stderr, flush=True)
        result[name] = json.loads(report.to_json())
        result[f"{name}_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
