"""Run one party of a split-learning session: PSI, training, checkpoints, its own model part.

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
HELP = "run one party (PSI + training) over mutual TLS, as configured"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set train.epochs=5 (repeatable)")
    parser.add_argument("--resume", action="store_true", help="continue from this party's last checkpoint")
    parser.add_argument("--quiet", action="store_true", help="no progress bars (logs still go to the run folder)")


def run(args: argparse.Namespace) -> int:
    from vsplit.cli.logs import log_to_run_folder
    from vsplit.config import load_config
    from vsplit.node import PartyNode

    config = load_config(args.config, overrides=args.overrides)
    node = PartyNode(config, resume=args.resume, progress=not args.quiet)  # the node of the config's topology
    with log_to_run_folder(node.folder, max_mb=node.config.output.log_max_mb):
        result = node.run()
    if not args.quiet:
        print(json.dumps(summary(result), indent=2))
    return 0


def summary(result: Any) -> dict[str, Any]:
    """What ``vsplit train`` prints of a party's result."""
    if hasattr(result, "schedule"):  # a horizontal split's rounds
        return {"party": result.party, "schedule": result.schedule, "seconds": result.seconds,
                "round_seconds": result.round_seconds, "lost": result.lost, "bytes_sent": result.comm.get("by_peer")}
    return {"party": result.party, "psi_intersection": result.psi.get("intersection"),
            "epochs": len(result.history) or None, "best_epoch": result.best_epoch, "seconds": result.seconds,
            "bytes_sent": result.comm.get("by_peer")}
