"""Rebuild a run's human report from its report.json files, and check them against the schema.

Example:
    vsplit report --run runs/bank-marketing-20261202-140000
    vsplit report --run runs/bank-marketing-20261202-140000 --check

Reads <run>/bank/report.json (the label party's) and, when present, the partner's own report.json, and rewrites
<run>/bank/report.md with its plots. --check validates report.json against vsplit/report/schema.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAME = "report"
HELP = "rebuild and check a run's report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="the run folder, <output.dir>/<run_id>")
    parser.add_argument("--label-party", default="bank", help="the label party's folder name (default: bank)")
    parser.add_argument("--check", action="store_true", help="validate report.json against the schema")


def run(args: argparse.Namespace) -> int:
    from vsplit.errors import ConfigError, DataError
    from vsplit.pilot.orchestrate import _merge_partner
    from vsplit.report.render import render_report
    from vsplit.report.writer import schema

    run_dir = Path(args.run)
    path = run_dir / args.label_party / "report.json"
    if not path.is_file():
        raise ConfigError(f"{path} not found; point --run at <output.dir>/<run_id> of a finished run")
    report = _merge_partner(run_dir, json.loads(path.read_text()))
    if args.check:
        import jsonschema

        try:
            jsonschema.validate(report, schema())
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
            raise DataError(f"{path}: does not match the report schema at {where}: {exc.message}") from None
        print(f"{path}: valid")
    print(f"wrote {render_report(run_dir / args.label_party, report)}")
    return 0
