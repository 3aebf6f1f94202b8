"""Serve a trained vertical split online: the bank answers HTTP, each partner runs a scoring daemon.

Example:
    # each partner: its daemon dials the bank and serves its embeddings (live or cached, as the bank says)
    vsplit serve --config parties/partner/party.toml
    # the bank: the HTTP API on serve.http (POST /v1/score, /v1/score:batch, GET /healthz, /v1/models, /metrics)
    vsplit serve --config parties/bank/party.toml
    curl -s localhost:8000/v1/score -d '{"id": "c-42", "features": {"age": 41, "job": "admin."}}'

The model version is a trained run: --run-id (default output.run_id). Load another beside it and switch with
POST /v1/models {"run_id": "..."}. Settings are the [serve] section of party.toml (docs/serving.md).
"""

from __future__ import annotations

import argparse

NAME = "serve"
HELP = "online scoring: the bank's HTTP API, or a partner's scoring daemon"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="this party's party.toml (the one it trained with)")
    parser.add_argument("--run-id", help="the trained run to serve (default: output.run_id)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--quiet", action="store_true", help="no access log lines")
    parser.add_argument("--console", action="store_true",
                        help="serve this party's read-only console in the browser (docs/console.md)")


def run(args: argparse.Namespace) -> int:
    import logging

    from vsplit.config import load_config, resolve
    from vsplit.serve.run import serve

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    config = load_config(args.config, overrides=args.overrides)
    from vsplit.config.names import run_folder
    from vsplit.console.live import live_console

    folder = run_folder(resolve(config, config.output.dir), args.run_id or config.output.run_id, config.party.name)
    with live_console(config, enabled=args.console, mode="serve", folder=folder) as console:
        return serve(config, run_id=args.run_id, console=console)
