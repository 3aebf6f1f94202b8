"""mkdocs hook: the CLI reference page (``cli.md``), written at build time from the parsers ``vsplit`` runs.

The page is every command's ``--help`` as :func:`vsplit.cli.main.build_parser` prints it, walked through the
subcommands, so it cannot drift from the code: there is no hand-copied help text to keep up to date.
"""

from __future__ import annotations

import argparse
import os

from mkdocs.structure.files import File

from vsplit.cli.main import build_parser

#: the width ``--help`` is wrapped at on the page (argparse reads COLUMNS)
WIDTH = "100"

INTRO = """# CLI reference

Every command of `vsplit` with its `--help`, generated from the argument parsers when the site is built
(`docs/hooks/cli_reference.py`), so it always matches the installed code. `vsplit COMMAND --help` prints the same.
Exit codes: `0` success, `1` a vsplit error (the message names the fix), `2` bad command-line usage,
`130` interrupted.
"""


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("vsplit",)):
    """``(path, parser)`` for the parser and every subcommand under it, depth first, in the order ``--help`` lists."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def cli_page() -> str:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parts = [INTRO]
        for path, parser in commands(build_parser()):
            level = "#" * min(len(path) + 1, 4)
            parts.append(f"{level} `{' '.join(path)}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        return "\n".join(parts)
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def on_files(files, config):
    files.append(File.generated(config, "cli.md", content=cli_page()))
    return files
