"""Open the read-only console of finished runs in the browser: each party folder's history, traffic, report,
model card and pictures, as its own process showed them live.

Example:
    vsplit console --runs runs/                      # every run under the output folder (pick one on the page)
    vsplit console --runs runs/my-first-pilot/bank   # one party's folder
    vsplit console --runs runs/ --port 8765

It listens on 127.0.0.1 (any free port unless --port; the address is printed) until Ctrl-C. A live console comes with
`vsplit train --console`, `vsplit pilot --console` and `vsplit serve --console` (docs/console.md). Read-only: it
answers GET only and serves the folders' own files by name.
"""

from __future__ import annotations

import argparse

NAME = "console"
HELP = "the read-only browser console of finished runs (live: train/pilot/serve --console)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, help="a runs folder (output.dir), one run's folder or a party's")
    parser.add_argument("--host", default="127.0.0.1", help="where to listen (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=0, help="the port (default: any free port, printed)")
    parser.add_argument("--token-file", help="a file holding the token a browser must show (needed off loopback)")


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from vsplit.console.server import ConsoleSettings, announce, finished_views, start_console

    token = None
    if args.token_file:
        from types import SimpleNamespace

        from vsplit.serve.run import read_token

        fake = SimpleNamespace(console=SimpleNamespace(token_file=str(Path(args.token_file).resolve())), source="")
        token = read_token(fake, "token_file", section="console")  # type: ignore[arg-type]
    settings = ConsoleSettings(host=args.host, port=args.port, token=token)
    views = finished_views(Path(args.runs))
    server = start_console(views, settings)
    print(announce(server, f"{len(views.names())} finished party folder(s) under {args.runs}",
                   token=token is not None), flush=True)
    try:
        while server.thread.is_alive():
            time.sleep(0.5)
    finally:
        server.close()
    return 0
