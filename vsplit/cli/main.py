"""The ``vsplit`` command: one subcommand per module in :mod:`vsplit.cli`.

Each command module exposes ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``. Exit codes:
0 success, 1 a vsplit error (the message says what to fix), 2 bad command-line usage, 3 training diverged (a loss was
not finite; the label party's message names the party whose input went out of range), 130 interrupted.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys

from vsplit.errors import DIVERGED, DivergenceError, RemoteAbort, VsplitError

#: Command modules, in the order ``vsplit --help`` lists them.
COMMANDS = ["keys", "psi", "bin", "train", "run", "tune", "predict", "serve", "explain", "monitor", "calibrate",
            "report", "pilot", "compare", "privacy", "plan", "topology", "console"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vsplit",
        description="Vertical split learning for finance.",
        epilog="Exit codes: 0 ok, 1 error (the message names the fix), 2 usage error, 3 training diverged, "
               "130 interrupted.",
    )
    from vsplit.version import __version__

    parser.add_argument("--version", action="version", version=f"vsplit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"vsplit.cli.{name.replace('-', '_')}")
        command = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except VsplitError as exc:
        print(f"vsplit: error: {exc}", file=sys.stderr)
        diverged = isinstance(exc, DivergenceError) or (isinstance(exc, RemoteAbort) and exc.code == DIVERGED)
        return EXIT_DIVERGED if diverged else EXIT_ERROR
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"vsplit: error: the disk is full ({exc}); free space (or set output.dir to another folder) and run "
              "again (with --resume to continue from the last checkpoint)", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("vsplit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
