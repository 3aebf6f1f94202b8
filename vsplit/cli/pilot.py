"""Run a whole cross-organization pilot on this machine: every party as its own process over mutual TLS.

Example:
    vsplit pilot bank-marketing-no-duration     # what `make demo` runs: no `duration`, which leaks the label
    vsplit pilot bank-marketing                 # with `duration`: a benchmark setting only
    vsplit pilot secretflow-bank --set train.epochs=5
    vsplit pilot bank-marketing --run-id my-first-pilot --quiet
    vsplit pilot u-shaped-credit     # the bank keeps columns, labels, head and tail; a compute party runs the middle
    vsplit pilot vanilla-credit      # a data owner runs the first layers; the bank holds labels and the rest
    vsplit pilot splitfed-credit     # three banks with the same columns, a server, a federated server (SplitFed)
    vsplit pilot splitfed-credit --set schedule.kind=sequential

Creates keys when missing, lays out each party's folder (parties/<party>/ for bank-marketing), starts
`vsplit train` for both parties (PSI, training, evaluation, model parts saved), then `vsplit predict` for both (a
batch prediction with the saved parts), adds the centralized baseline (possible here only because the pooled data
exists on this one machine), and writes the report: runs/<run-id>/bank/report.md. parties/run_pilot.sh shows the
same steps by hand.
"""

from __future__ import annotations

import argparse

NAME = "pilot"
HELP = "run a pilot on a bundled preset, one process per party over mutual TLS, with report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from vsplit.pilot.orchestrate import PRESETS

    parser.add_argument("preset", choices=sorted(PRESETS),
                        help="bundled data set and kind of split")
    parser.add_argument("--run-id", help="name of the run (default: preset and time)")
    parser.add_argument("--root", help="folder holding the party folders (default: parties/ for bank-marketing)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a value in both parties' configs, e.g. --set train.epochs=5")
    parser.add_argument("--quiet", action="store_true", help="no progress bars; print only the summary")
    parser.add_argument("--console", action="store_true",
                        help="each party serves its read-only console in the browser while it trains (docs/console.md)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from vsplit.pilot.orchestrate import run_pilot

    result = run_pilot(args.preset, root=Path(args.root) if args.root else None, run_id=args.run_id,
                       overrides=tuple(args.overrides), quiet=args.quiet, console=args.console)
    report = result.report
    if "banks" in report:  # a horizontal pilot: each bank's own test rows
        print(f"\n{args.preset}: {report['schedule']}")
        for bank, m in report["banks"].items():
            print(f"  {bank:<10} test AUC {m['auc']:.4f} on its {m['test_rows']} test rows")
        pooled = report["pooled_test"]
        print(f"  {'pooled':<10} test AUC {pooled['auc']:.4f} on all {pooled['test_rows']}")
        print(f"report: {report['report']}   ({report['seconds']:.0f} s)")
        return 0
    kind = report.get("topology", "vertical")
    rows = [(f"split ({kind})", report["metrics"])]
    rows += [(k.replace("_", " "), v) for k, v in report["baselines"].items()]
    print(f"\n{args.preset}: test AUC on the {report['metrics']['n_scored']} customers the parties share")
    for name, metrics in rows:
        print(f"  {name:<24} AUC {metrics['auc']:.4f}   Gini {2 * metrics['auc'] - 1:.4f}   KS {metrics['ks']:.4f}")
    from vsplit.cli.summary import coverage_summary, leak_note

    print(*coverage_summary(report), sep="\n")
    print(*leak_note(args.preset), sep="\n")
    bank = result.run_dir / "bank"
    print(f"report: {bank / 'report.md'} (and report.html)   predictions: {result.predictions}   "
          f"({result.seconds:.0f} s)")
    return 0

