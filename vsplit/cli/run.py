"""`vsplit run` is an alias of `vsplit train`: one party of a split-learning session (PSI, training, checkpoints,
its own model part). Prefer `vsplit train`; `run` stays for scripts written before.

Example:
    vsplit run --config parties/bank/party.toml          # on the bank's machine (listens)
    vsplit run --config parties/partner/party.toml       # on the partner's machine (dials the bank)
    vsplit run --config parties/bank/party.toml --set train.epochs=5 --resume

Each organization runs its own process with its own config. Both configs name the same output.run_id. Outputs go
to <output.dir>/<run_id>/<party>/: model.npz (this party's part only), checkpoints/, result.json, log.txt (rotated past
output.log_max_mb).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

NAME = "run"
HELP = "alias of `vsplit train`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set train.epochs=5 (repeatable)")
    parser.add_argument("--resume", action="store_true", help="continue from this party's last checkpoint")
    parser.add_argument("--quiet", action="store_true", help="no progress bars (logs still go to the run folder)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object instead of the summary")
    parser.add_argument("--console", action="store_true",
                        help="serve this party's read-only console in the browser while it runs (docs/console.md)")


def run(args: argparse.Namespace) -> int:
    from vsplit.cli.logs import log_to_run_folder

    node = checked_node(args)  # the node of the config's topology
    config = node.config
    from vsplit.console.live import live_console

    with log_to_run_folder(node.folder, max_mb=node.config.output.log_max_mb), \
            live_console(config, enabled=args.console, mode="train", node=node):
        result = node.run()
    from vsplit.cli.summary import train_record, train_summary

    report = node.folder / "report.md"
    report = report if report.is_file() else None
    print(json.dumps(train_record(result, report=report), indent=2) if args.json
          else train_summary(result, report=report))
    return 0



def checked_node(args: argparse.Namespace) -> Any:
    """The node of ``args.config``; if the config's files or the party's own checks fail, its peers are told at once
    (an abort code, :mod:`vsplit.node.early`) rather than left waiting, then the error is raised."""
    from vsplit.config import load_config
    from vsplit.errors import ConfigError, VsplitError
    from vsplit.node import PartyNode, session_id
    from vsplit.node.early import tell_peers

    try:
        config = load_config(args.config, overrides=args.overrides)
    except ConfigError as exc:
        try:  # only files are missing (a table, a test table): the links may still be fine
            reachable = load_config(args.config, overrides=args.overrides, check_files=False)
        except VsplitError:
            raise exc from None
        tell_peers(reachable, exc, session=session_id(reachable.output.run_id))
        raise
    try:
        return PartyNode(config, resume=args.resume, progress=not args.quiet)
    except VsplitError as exc:
        tell_peers(config, exc, session=session_id(config.output.run_id))
        raise
