"""Train one party's part of a split model: PSI with the peers, split training, test scoring, reports.

Example:
    vsplit train --config parties/bank/party.toml
    vsplit train --config parties/partner/party.toml --set train.lr=0.0005
    vsplit train --config parties/bank/party.toml --resume       # after a crash: continue from checkpoints

Ends with a short summary (PSI, epochs, test AUC and Gini, the report's path); --json prints one JSON object
instead. `vsplit run` is an alias. Outputs go to <output.dir>/<run_id>/<party>/: model.npz, fallback.npz (the label
party's own model, for customers a partner does not know), result.json, report.md and report.html. With
`[train] networks = N` (every party the same) it trains a bag of N networks one after another, all kept in model.npz;
predict and serve score with their mean (docs/pilot.md, "A bag of networks").
"""

from __future__ import annotations

from vsplit.cli.run import add_arguments, run

NAME = "train"
HELP = "PSI + split training + test scoring + report for one party (alias: `vsplit run`)"

__all__ = ["HELP", "NAME", "add_arguments", "run"]
