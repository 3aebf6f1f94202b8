"""Score customers jointly with each party's saved model part; only the label party receives scores.

Example:
    # bank (label party): score the IDs in new_ids.csv, with its own columns from data/test.parquet
    vsplit predict --config parties/bank/party.toml --input data/test.parquet --ids new_ids.csv
    # partner: contribute its columns of the customers it knows
    vsplit predict --config parties/partner/party.toml --input data/test.parquet

PSI first aligns the customers; customers a party does not know are listed in predictions.csv with a status
("unknown to a partner", "unknown to bank"), never silently dropped. Each party loads only its own model.npz.
Output: <output.dir>/<run_id>/<party>/predictions.csv (label party) and predict.json (every party).
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "predict"
HELP = "joint batch prediction with the saved model parts (label party gets the scores)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml (the one it trained with)")
    parser.add_argument("--input", help="this party's table of the customers to score (a compute party has none)")
    parser.add_argument("--ids", help="label party: a CSV/Parquet with the ID column of the customers to score")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--quiet", action="store_true")


def run(args: argparse.Namespace) -> int:
    from vsplit.cli.logs import log_to_run_folder
    from vsplit.config import load_config
    from vsplit.runtime.node import PartyNode

    config = load_config(args.config, overrides=args.overrides)
    node = PartyNode(config, progress=False)
    with log_to_run_folder(node.folder):
        path = node.predict(Path(args.input) if args.input else None, ids_path=Path(args.ids) if args.ids else None)
    if not args.quiet:
        print(f"{config.party.name}: wrote {path}")
    return 0
