"""Search a split model's settings between organizations: the label party proposes trials, each partner accepts
only values inside the bounds of its own config, every trial trains over the parties' mutual-TLS links on the
training rows and is scored on a validation part of the label party's training rows (never the test rows).

Example:
    vsplit tune --config parties/bank/party.toml        # the label party: runs the study ([tune] n_trials, space)
    vsplit tune --config parties/partner/party.toml     # each partner: answers within its [tune] bounds

A partner refuses a trial outside its bounds or vsplit's hard limits (an lr too small to train, an absurd width), and
an end of search naming a trial it did not train as proposed: it then writes no best.toml. A refused or crashed
trial is recorded, not fatal; the study (an Optuna journal, tune.study) resumes when run again.
Each party ends with its ready-to-run <output.dir>/<run_id>/<party>/tune/best.toml (train it with `vsplit train
--config .../best.toml`) and tune.json (every trial: values, state, validation AUC, reason). Needs
`pip install 'vsplit[tune]'` at the label party. See docs/tuning.md. With --console (or [console] enabled) the
party serves its read-only console while it searches: the stage, peers, traffic, trials done and the best validation
AUC so far (docs/console.md).
"""

from __future__ import annotations

import argparse
import json

NAME = "tune"
HELP = "search model settings between organizations (label party proposes, partners bound)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml (with a [tune] table)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set tune.n_trials=30 (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (logs still go to the run folder)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object instead of the summary")
    parser.add_argument("--console", action="store_true",
                        help="serve this party's read-only console in the browser while it searches (docs/console.md)")


def run(args: argparse.Namespace) -> int:
    from vsplit.cli.logs import log_to_run_folder
    from vsplit.config import load_config
    from vsplit.console.live import live_console
    from vsplit.tune.between import tune
    from vsplit.tune.trial import tune_folder

    config = load_config(args.config, overrides=args.overrides)
    folder = tune_folder(config)
    with log_to_run_folder(folder, max_mb=config.output.log_max_mb), \
            live_console(config, enabled=args.console, mode="tune", folder=folder) as console:
        outcome = tune(config, progress=not args.quiet, overrides=args.overrides, console=console)
    if args.json:
        print(json.dumps({"party": outcome.party, "best": outcome.best, "files": outcome.files}, indent=2))
        return 0
    done = sum(t["state"] == "COMPLETE" for t in outcome.trials)
    print(f"{outcome.party}: {len(outcome.trials)} trials, {done} finished, "
          f"{len(outcome.trials) - done} refused or crashed (reasons in tune.json)")
    best = outcome.best or {}
    print(f"best: trial {best.get('number')}, validation AUC {best.get('auc', float('nan')):.4f}, {best.get('values')}")
    for what, path in outcome.files.items():
        print(f"{what}: {path}")
    return 0
