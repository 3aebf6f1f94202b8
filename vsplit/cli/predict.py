"""Score customers jointly with each party's saved model part; only the label party receives scores.

Example:
    # bank (label party): score the IDs in new_ids.csv, with its own columns from data/test.parquet
    vsplit predict --config parties/bank/party.toml --input data/test.parquet --ids new_ids.csv --job 2026-12-04
    # partner: contribute its columns of the customers it knows
    vsplit predict --config parties/partner/party.toml --input data/test.parquet --job 2026-12-04

PSI first aligns the customers; customers a party does not know are listed in predictions.csv with a status
("unknown to a partner", "unknown to bank"), never silently dropped. Each party loads only its own model.npz.
Every predict is its own scoring job: --job names it (default: the UTC time; give every party the same, e.g. the
date of a daily run), and it writes only <output.dir>/<run_id>/<party>/predictions/<job>/: predictions.csv (label
party), predict.json (every party) and log.txt. A job killed mid-way continues with --resume --job <id> on every
party; other jobs are not affected. --input and --ids are paths from the current folder; paths in the config are
from the config file's folder.

A horizontal split (many banks with the same columns): each bank scores its own customers, the server serves them:
    vsplit predict --config server/party.toml [--banks bank_1,bank_2]
    vsplit predict --config bank_1/party.toml --input bank_1/new_customers.parquet
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
    parser.add_argument("--banks", help="horizontal split, at the server: the banks to serve, comma-separated "
                        "(default: every client)")
    parser.add_argument("--job", help="this scoring job's ID: its folder under <run>/<party>/predictions/ (default: "
                        "the UTC time; letters, digits, '.', '_', '-')")
    parser.add_argument("--resume", action="store_true", help="continue the interrupted job named by --job")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--quiet", action="store_true")


def run(args: argparse.Namespace) -> int:
    from vsplit.cli.logs import log_to_run_folder
    from vsplit.config import load_config
    from vsplit.errors import VsplitError
    from vsplit.node import PartyNode
    from vsplit.runtime.jobs import PredictJob

    config = load_config(args.config, overrides=args.overrides)
    node = PartyNode(config, progress=False)
    try:
        table, ids = _given(args.input, "--input"), _given(args.ids, "--ids")
        job = PredictJob.open(node.folder, args.job, resume=args.resume)
    except VsplitError as exc:  # the peers are told at once rather than left waiting (vsplit.node.early)
        node.tell_peers_before_scoring(exc)
        raise
    peers = [b.strip() for b in args.banks.split(",") if b.strip()] if args.banks else None
    with log_to_run_folder(job.folder, max_mb=node.config.output.log_max_mb):
        path = node.predict(table, ids_path=ids, job=job, peers=peers)
    from vsplit.cli.summary import predict_summary

    print(predict_summary(path))
    return 0


def _given(path: str | None, option: str) -> Path | None:
    """A path given on the command line: from the current folder (config paths are from the config's folder)."""
    if not path:
        return None
    found = Path(path).resolve()
    if not found.is_file():
        from vsplit.errors import DataError

        raise DataError(f"{option} {path}: no such file ({found}); a path given on the command line is from the "
                        f"current folder, {Path.cwd()}")
    return found
