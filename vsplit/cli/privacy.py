"""Measure what leaks across the cut, and what defenses cost.

  vsplit privacy audit --preset bank_marketing --defense none --defense clip_noise --seeds 3 --out audit/
  vsplit privacy audit --preset default_credit --defense none --defense nopeek:weight=1 --epochs 5 --json
  vsplit privacy audit --topology vanilla --preset digits --quick --out audit-vanilla/
  vsplit privacy audit --topology u_shaped --preset bank_marketing --defense none --defense clip_noise
  vsplit privacy defenses
  vsplit privacy detectors

``audit`` trains once per defense setting and seed, runs every attack (label leakage from gradients, model
completion, feature reconstruction) and prints a table of test AUC and leakage per setting (means over seeds), or
with ``--json`` one JSON list of rows. ``--out DIR`` also writes report.md, report.json and privacy_utility.png.
A defense is ``name`` or ``name:key=value,...``; ``a+b`` combines two. ``defenses`` lists them; ``detectors`` lists
what a vanilla or U-shaped client can run against a hijacking server (``[privacy] detectors`` in its party.toml).

``--topology`` (default ``vertical``) audits the other splits: ``vanilla`` on an image preset (``digits``) inverts
the client's activations at every module cut and runs a hijacking server (FSHA) against the client's detectors, on
a tabular preset the server reconstructs the client's columns; ``u_shaped`` on ``digits`` runs the inversion study,
on a binary preset the server's label attacks on the gradients the client returns. ``--quick`` shrinks the image
studies to a few minutes. ``--out DIR`` also writes the pictures.
"""

from __future__ import annotations

import argparse
import sys

NAME = "privacy"
HELP = "privacy audit: attacks on what each party sees, and defenses with their cost"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="privacy_command", required=True, metavar="ACTION")
    audit = sub.add_parser("audit", help="train with each defense and run every attack", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    # The preset is checked in run(): listing the presets here would import pandas for every `vsplit --help`.
    audit.add_argument("--topology", default="vertical", choices=("vertical", "vanilla", "u_shaped"),
                       help="the split to audit (default vertical)")
    audit.add_argument("--quick", action="store_true", help="image studies: small sizes, a few minutes")
    audit.add_argument("--preset", required=True, metavar="PRESET",
                       help="the data set to audit: a preset of vsplit.datasets, e.g. bank_marketing")
    audit.add_argument("--defense", action="append", dest="defenses", metavar="CONFIG",
                       help="a defense setting, repeatable (default: none and every registered defense)")
    audit.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    audit.add_argument("--epochs", type=int, default=None, help="training epochs (default: the estimator's)")
    audit.add_argument("--batch-size", type=int, default=None, help="training batch size")
    audit.add_argument("--known-labels", type=int, nargs="+", default=[40, 200], metavar="N",
                       help="label budgets of the model-completion attacker (default 40 200)")
    audit.add_argument("--aux-rows", type=int, default=200, help="rows the reconstruction attacker knows")
    audit.add_argument("--json", action="store_true", help="print one JSON list of rows instead of a table")
    audit.add_argument("--out", default=None, metavar="DIR", help="write report.md, report.json and the plot here")
    audit.add_argument("--quiet", action="store_true", help="no progress lines on standard error")
    sub.add_parser("defenses", help="list the defense names and named settings")
    sub.add_parser("detectors", help="list the detectors a client can run against a hijacking server")


def run(args: argparse.Namespace) -> int:
    if args.privacy_command == "defenses":
        from vsplit.privacy.defenses import DEFENSES

        return _list(DEFENSES)
    if args.privacy_command == "detectors":
        from vsplit.privacy.detectors.registry import DETECTORS  # registers every detector

        return _list(DETECTORS)
    from vsplit.datasets import PRESETS
    from vsplit.errors import ConfigError
    from vsplit.privacy import DEFAULT_AUDIT_DEFENSES, audit

    if args.preset not in PRESETS:
        raise ConfigError(f"--preset {args.preset!r} is not a bundled preset; choose one of: {', '.join(PRESETS)}")
    if args.seeds < 1:
        raise ConfigError("--seeds must be at least 1")
    if args.topology != "vertical":
        return _topology_audit(args)
    report = audit(
        args.preset,
        defenses=args.defenses or list(DEFAULT_AUDIT_DEFENSES),
        seeds=args.seeds,
        epochs=args.epochs,
        batch_size=args.batch_size,
        known_labels=args.known_labels,
        aux_rows=args.aux_rows,
        progress=_progress(args),
    )
    return _show(report, args)


def _topology_audit(args: argparse.Namespace) -> int:
    from vsplit.privacy.topology_audit import ImageAuditSizes, audit_topology

    report = audit_topology(
        args.topology, args.preset, defenses=args.defenses, seeds=args.seeds, epochs=args.epochs,
        batch_size=args.batch_size, sizes=ImageAuditSizes.quick() if args.quick else None,
        progress=_progress(args),
    )
    return _show(report, args)


def _list(registry) -> int:
    """One line per registered name: its summary and named settings."""
    for name in registry.names():
        factory = registry.get(name)
        target = getattr(factory, "func", factory)
        summary = (target.__doc__ or "").strip().splitlines()[0]
        preset = getattr(factory, "keywords", None)
        print(f"{name:26} {summary}" + (f" [{', '.join(f'{k}={v}' for k, v in preset.items())}]" if preset else ""))
    return 0


def _progress(args: argparse.Namespace):
    """Progress lines to stderr, unless ``--quiet``."""
    return None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))


def _show(report, args: argparse.Namespace) -> int:
    """Write the report files (``--out``), then print its JSON (``--json``) or table."""
    if args.out:
        paths = report.write(args.out)
        if not args.quiet:
            print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    print(report.to_json() if args.json else report.table())
    return 0
