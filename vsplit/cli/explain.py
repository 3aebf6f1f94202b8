"""Explain the saved split model's score for some rows: per-row attributions, reason codes (label party).

Example:
    # bank (label party): attributions of its own columns and each partner as a group, and reason codes
    vsplit explain --config parties/bank/party.toml --input data/applicants.parquet --job 2026-12-05
    # partner: its own columns' attributions, kept in its own folder (it may share its top-k names: [explain])
    vsplit explain --config parties/partner/party.toml --input data/applicants.parquet --job 2026-12-05

Every party runs it with the same --job; PSI aligns the rows first. What crosses between the parties: the same
kinds of tensors as in scoring and training (the embeddings of the rows' integrated-gradients path, the gradients
of the score), one group attribution per row, and a partner's top-k column names only if its [explain] share_top_k
allows. Outputs go to <output.dir>/<run_id>/<party>/explanations/<job>/ (docs/governance.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "explain"
HELP = "per-row attributions of the saved model's score and reason codes (each party keeps its own columns')"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml (the one it trained with)")
    parser.add_argument("--input", help="this party's table of the rows to explain (a compute party has none)")
    parser.add_argument("--job", help="this explanation's ID, the same at every party (default: the UTC time)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    from vsplit.config import load_config
    from vsplit.explain.process import explain_party

    config = load_config(args.config, overrides=args.overrides)
    path = explain_party(config, Path(args.input) if args.input else None, job=args.job)
    print(f"explanation written: {path.parent}")
    return 0
