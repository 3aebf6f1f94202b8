"""The stability index (PSI in credit-risk usage) of this party's columns, embedding and score on new rows.

Example:
    vsplit monitor --config parties/bank/party.toml --input data/new.parquet
    # with the score: both populations scored by vsplit predict first
    vsplit monitor --config parties/bank/party.toml --input data/new.parquet \\
        --scores runs/r/bank/predictions/new/predictions.csv \\
        --baseline-scores runs/r/bank/predictions/train/predictions.csv

Bands: below 0.1 stable, 0.1 to 0.25 worth a look, 0.25 or more a shift. Nothing is sent to the peers; a partner
runs it on its own table (its embedding dimensions are what the label party's model reads of it). Writes
stability.csv and stability.json under <output.dir>/<run_id>/<party>/monitor/<job>/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "monitor"
HELP = "stability index of this party's columns, embedding and score between training and new rows"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml (the one it trained with)")
    parser.add_argument("--input", required=True, help="this party's table of the new rows")
    parser.add_argument("--scores", help="label party: predictions.csv of the new rows (vsplit predict)")
    parser.add_argument("--baseline-scores", help="label party: predictions.csv of the training rows")
    parser.add_argument("--bins", type=int, default=10, help="bins of a numeric column (default: 10, deciles)")
    parser.add_argument("--job", help="this report's ID (default: the UTC time)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    from vsplit.config import load_config
    from vsplit.monitor.process import monitor_party, render

    config = load_config(args.config, overrides=args.overrides)
    table, folder = monitor_party(
        config, Path(args.input), scores=Path(args.scores) if args.scores else None,
        baseline_scores=Path(args.baseline_scores) if args.baseline_scores else None, job=args.job, bins=args.bins)
    print(render(table))
    print(f"written: {folder / 'stability.csv'}")
    return 0
