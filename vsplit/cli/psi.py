"""Align customer IDs with the peers by private set intersection, without training.

Example:
    vsplit psi --config parties/bank/party.toml       # listens
    vsplit psi --config parties/partner/party.toml    # dials

Each party learns the customers it shares with the others (in psi.reveal = "both" mode) and nothing about the rest
but their count. Writes <output.dir>/<run_id>/<party>/psi.json (sizes, intersection, seconds, bytes),
alignment.npy (this party's row numbers of the shared customers, in the agreed order: int64, 8 bytes per shared
customer, written atomically; ``vsplit.runtime.psi.load_rows`` memory-maps it) and alignment.csv (the same rows,
with the IDs where this party learns them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

NAME = "psi"
HELP = "private set intersection of customer IDs with the peers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--quiet", action="store_true")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from vsplit import strict_json
    from vsplit.atomic import write_atomic
    from vsplit.cli.logs import log_to_run_folder
    from vsplit.config import load_config
    from vsplit.node import PartyNode, session_id
    from vsplit.node.aligned import psi_summary
    from vsplit.psi.alignment import canonical_rows
    from vsplit.runtime.psi import run_party, save_rows
    from vsplit.runtime.pump import Pump

    config = load_config(args.config, overrides=args.overrides)
    node = PartyNode(config, progress=False)
    with log_to_run_folder(node.folder, max_mb=node.config.output.log_max_mb):
        channels = node.open_channels()
        pump = Pump(node.name, channels, session=session_id(config.output.run_id + ":psi"),
                    timeout=config.network.read_timeout_s)
        try:
            alignment = run_party(pump, node.psi_machine(node.party.ids))
        finally:
            for channel in channels.values():
                channel.close()
    rows = canonical_rows(alignment)
    save_rows(dataclasses.replace(alignment, rows=rows), node.folder / "alignment.npy")
    stats = psi_summary(alignment)
    write_atomic(node.folder / "psi.json", (strict_json.dumps(stats, indent=2) + "\n").encode(), within=node.folder)
    frame = pd.DataFrame({"row": rows})
    if alignment.ids is not None:
        frame[config.data.id_column] = sorted(alignment.ids)
    write_atomic(node.folder / "alignment.csv", frame.to_csv(index=False).encode(), within=node.folder)
    node.forget_psi_progress()
    if not args.quiet:
        print(json.dumps(stats, indent=2))
    return 0
