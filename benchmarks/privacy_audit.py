"""Privacy audit benchmark: every attack against no defense and each defense, on the bundled presets.

    .venv/bin/python benchmarks/privacy_audit.py                      # bank_marketing and default_credit, 3 seeds
    .venv/bin/python benchmarks/privacy_audit.py --epochs 5 --seeds 1 --presets default_credit --out /tmp/audit
    .venv/bin/python benchmarks/privacy_audit.py --frontier                # also the label-defense frontier
    .venv/bin/python benchmarks/privacy_audit.py --frontier --frontier-only \
        --update benchmarks/results-privacy-audit.json  # only the frontier, into the earlier results

Prints one JSON object: preset name -> the audit's rows (one per defense setting, means over seeds), plus the
settings used. With --out, each preset's report (report.md, report.json, privacy_utility.png) goes to OUT/PRESET/.
With --frontier [SETTING ...], also ``frontier``: every label-defense setting tried (default: the list in
``benchmarks/privacy_frontier.py``) on --frontier-preset, label attacks only, its leak AUC (the stronger of norm and
direction scoring) against its AUC cost, the Pareto front and the settings meeting the goal (leak <= 0.60 at <= 1.0
point); the plot goes to --plot. --frontier-only skips the presets' full audits; --update FILE puts the frontier
into an earlier result file (keeping its other keys) and writes it back; with --frontier-keep the earlier frontier's
settings not measured now stay in it (each point's ``measured`` says when and under what load it was run).
A setting chosen on the frontier's seeds is confirmed on others with --held-out SEED ...: the --frontier settings
(and ``none``) on those seeds, under the key ``held_out`` (same layout as ``frontier``, plus ``chosen_on_seeds``)::

    .venv/bin/python benchmarks/privacy_audit.py --frontier-only --frontier-keep --held-out 3 4 5 \
        --update benchmarks/results-privacy-audit.json --frontier none@lr=0.002 \
        max_norm+clip_noise:noise_multiplier=0.35,centred=true@lr=0.002
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
from privacy_frontier import BASE, DEFAULT_FRONTIER, merge_frontier, plot_frontier, run_frontier

from vsplit.atomic import write_atomic
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
    parser.add_argument("--frontier", nargs="*", default=None, metavar="SETTING",
                        help="also measure the label-defense frontier (no SETTING: the default list)")
    parser.add_argument("--frontier-preset", default="bank_marketing")
    parser.add_argument("--frontier-only", action="store_true", help="skip the presets' full audits")
    parser.add_argument("--update", default=None, help="put the results into this earlier result file, keeping its "
                        "other keys, and write it back")
    parser.add_argument("--plot", default="docs/img/privacy_frontier.png", help="where the frontier plot goes")
    parser.add_argument("--frontier-keep", action="store_true", help="with --update: keep the earlier frontier's "
                        "settings not measured now (same seeds, epochs, batch and baseline, else refused)")
    parser.add_argument("--held-out", nargs="+", type=int, default=None, metavar="SEED",
                        help="measure the --frontier settings on these seeds instead (ones they were not chosen on) "
                        "and put them under the key held_out, not frontier (no plot)")
    parser.add_argument("--frontier-cache", default="runs/privacy-frontier", help="each frontier setting's runs are "
                        "kept here and not run again (delete it to measure afresh)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result: dict[str, object] = json.loads(Path(args.update).read_text()) if args.update else {}
    if not args.frontier_only:
        result["settings"] = {
            "seeds": args.seeds, "epochs": args.epochs, "batch_size": args.batch_size, "defenses": args.defenses,
            "known_labels": [40, 200], "aux_rows": 200, "torch": torch.__version__,
        }
    for name in [] if args.frontier_only else args.presets:
        started = time.perf_counter()
        report = audit(
            name, defenses=args.defenses, seeds=args.seeds, epochs=args.epochs, batch_size=args.batch_size,
            estimator=BASE,  # the plain network these figures were measured on (the default until issue 25)
            progress=lambda line, name=name: print(f"[{name}] {line}", file=sys.stderr, flush=True),
        )
        if args.out:
            report.write(f"{args.out}/{name}")
        print(f"[{name}]\n{report.table()}", file=sys.stderr, flush=True)
        result[name] = json.loads(report.to_json())
        result[f"{name}_seconds"] = round(time.perf_counter() - started, 1)
    if args.frontier is not None:
        key = "held_out" if args.held_out else "frontier"
        earlier = result.get(key) if args.frontier_keep else None
        block = run_frontier(
            args.frontier_preset, args.frontier or DEFAULT_FRONTIER, seeds=args.held_out or args.seeds,
            epochs=args.epochs, batch_size=args.batch_size,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            cache=Path(args.frontier_cache) if args.frontier_cache else None,
        )
        block["load_average"] = [round(v, 2) for v in os.getloadavg()]
        if earlier:
            block = merge_frontier(earlier, block)
        if args.held_out:  # the seeds the settings were chosen on, to be read against these
            block["chosen_on_seeds"] = result.get("frontier", {}).get("seeds", args.seeds)
        else:
            block["plot"] = str(plot_frontier(block, Path(args.plot)))
        result[key] = block
    text = json.dumps(result, indent=2)
    if args.update:
        write_atomic(args.update, (text + "\n").encode())
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
