"""Fit the label party's calibration of its scores on validation rows; vsplit predict applies it from then on.

Example:
    # score validation rows the model did not train on (every party), then fit at the label party
    vsplit predict --config parties/bank/party.toml --input data/valid.parquet --job valid
    vsplit calibrate --config parties/bank/party.toml --input data/valid.parquet \\
        --predictions runs/pilot/bank/predictions/valid/predictions.csv --method temperature

Writes calibration.json (plain numbers: a temperature, or the isotonic steps) into the label party's run folder;
every later vsplit predict of that run applies it, and serving can apply the same file. Delete it to go back.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "calibrate"
HELP = "label party: fit temperature or isotonic calibration on validation rows (vsplit predict applies it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="the label party's party.toml")
    parser.add_argument("--input", required=True, help="the label party's table of the validation rows (labels)")
    parser.add_argument("--predictions", required=True, help="predictions.csv of the same rows (vsplit predict)")
    parser.add_argument("--method", default="temperature", choices=["temperature", "isotonic"])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from vsplit.config import load_config
    from vsplit.config.load import resolve
    from vsplit.config.names import run_folder
    from vsplit.data.sources import read_table
    from vsplit.errors import ConfigError
    from vsplit.explain.calibration import FILE, fit_from_predictions

    config = load_config(args.config, overrides=args.overrides)
    d = config.data
    if config.party.role != "label" or d.label is None:
        raise ConfigError(f"{args.config}: calibrate runs at the label party (it needs the labels)")
    labels = read_table(Path(args.input), id_column=d.id_column, features=[d.label], option="--input")
    predictions = pd.read_csv(args.predictions, dtype={d.id_column: str})
    calibrator = fit_from_predictions(predictions, labels, id_column=d.id_column, label=d.label,
                                      positive_label=d.positive_label, method=args.method)
    path = calibrator.save(run_folder(resolve(config, config.output.dir), config.output.run_id, config.party.name)
                           / FILE)
    print(f"calibration ({calibrator.method}) written: {path}")
    return 0
