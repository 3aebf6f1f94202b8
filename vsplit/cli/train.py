"""Train one party's part of a split model: PSI with the peers, split training, test scoring, reports.

Example:
    vsplit train --config parties/bank/party.toml
    vsplit train --config parties/partner/party.toml --set train.lr=0.0005
    vsplit train --config parties/bank/party.toml --resume       # after a crash: continue from checkpoints

The same as `vsplit run`. Outputs go to <output.dir>/<run_id>/<party>/.
"""

from __future__ import annotations

from vsplit.cli.run import add_arguments, run

NAME = "train"
HELP = "PSI + split training + test scoring for one party (same as `vsplit run`)"

__all__ = ["HELP", "NAME", "add_arguments", "run"]
