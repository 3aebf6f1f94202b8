"""Bin every attribute of every party across the cut and report what each is worth: WOE, IV, the value report.

Example:
    vsplit bin --config parties/bank/party.toml       # on the bank's machine (listens; holds the label)
    vsplit bin --config parties/partner/party.toml    # on the partner's machine (dials the bank)

Each party bins its own attributes on the customers all parties share (PSI first); the bank encrypts its labels, a
partner sums them per bin of its own attributes and never sees a label; the bank never sees a partner's value or bin
edge. Settings are the config's [woe] section (docs/credit_scoring.md): a partner decides there whether its attribute
names are shown (share_names) and the fewest rows a bin may have (min_bin_rows). Outputs go to
<output.dir>/<run_id>/<party>/: woe.npz (this party's WOE maps), woe.json, selected.json (select_min_iv,
select_top_k) and, at the bank, value_report.md, value_report.html and iv.png. With --console (or [console]
enabled) the party serves its read-only console while it bins; `vsplit console --runs DIR` shows the value report after.
"""

from __future__ import annotations

import argparse
import json

NAME = "bin"
HELP = "WOE binning and information value across the cut: the value report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, e.g. --set woe.min_bin_rows=50 (repeatable)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object instead of the summary")
    parser.add_argument("--console", action="store_true",
                        help="serve this party's read-only console in the browser while it bins (docs/console.md)")


def run(args: argparse.Namespace) -> int:
    from vsplit.cli.logs import log_to_run_folder
    from vsplit.config import load_config
    from vsplit.console.live import live_console
    from vsplit.node.woe import WoeNode

    config = load_config(args.config, overrides=args.overrides)
    node = WoeNode(config)
    with log_to_run_folder(node.folder, max_mb=config.output.log_max_mb), \
            live_console(config, enabled=args.console, mode="bin", node=node):
        summary = node.run()
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "tables"}, indent=2))
        return 0
    print(f"{node.name}: {summary['psi']['intersection']:,} shared customers; "
          f"{len(summary['iv'])} attributes binned, {len(summary['selected'])} selected (selected.json)")
    for row in summary.get("tables", [])[:10]:
        print(f"  {row['party']:>12}  {row['attribute']:<28} IV {row['iv']:.4f}  {row['band']}")
    if "report" in summary:
        print(f"report: {node.folder / summary['report']}")
    return 0
