"""Rebuild a run's human report from its report.json files, and check them against the schema.

Example:
    vsplit report --run runs/bank-marketing-20261202-140000
    vsplit report --run runs/bank-marketing-20261202-140000 --check

Reads <run>/bank/report.json (the label party's own, never rewritten) and every other <run>/<party>/report.json (each
partner's own), and writes the merged report to <run>/bank/report-merged.json and <run>/bank/report.md with its
plots. Each partner's entries are keyed by its folder; a file whose "party" is not its folder, or that is not a
well-formed report, is refused and nothing is written. --check validates both the bank's own and the merged report
against vsplit/report/schema.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "report"
HELP = "rebuild and check a run's report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="the run folder, <output.dir>/<run_id>")
    parser.add_argument("--label-party", default="bank", help="the label party's folder name (default: bank)")
    parser.add_argument("--check", action="store_true", help="validate the reports against the schema")


def run(args: argparse.Namespace) -> int:
    from vsplit.errors import ConfigError, DataError
    from vsplit.report.merge import MERGED, merge_reports, read_report
    from vsplit.report.render import render_report
    from vsplit.report.writer import schema

    run_dir = Path(args.run)
    path = run_dir / args.label_party / "report.json"
    if not path.is_file():
        raise ConfigError(f"{path} not found; point --run at <output.dir>/<run_id> of a finished run")
    own = read_report(path)
    if own.get("party") != args.label_party:
        raise DataError(f"{path}: says party {own.get('party')!r} but sits in folder {args.label_party!r}; pass "
                        "--label-party with the label party's folder, or restore the file its run wrote")
    report = merge_reports(run_dir, own)
    if args.check:
        import jsonschema

        for name, payload in (("report.json", own), (MERGED, report)):
            try:
                jsonschema.validate(payload, schema())
            except jsonschema.ValidationError as exc:
                where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
                raise DataError(f"{path.parent / name}: does not match the report schema at {where}: "
                                f"{exc.message}") from None
        print(f"{path}: valid; merged with {len(report.get('merged_from', {}))} partner report(s)")
    print(f"wrote {render_report(run_dir / args.label_party, report)} and {run_dir / args.label_party / MERGED}")
    return 0
