"""mkdocs hook: a figure written ``{{ results-NAME.json > key > key | format }}`` on a page is read from
``benchmarks/results-NAME.json`` when the site is built, so a page quotes exactly what a benchmark wrote.

A key that names a list entry is its index (``0``) or ``field=value`` (the first entry whose ``field`` is
``value``). The format is Python's (``.4f``, ``,``, ``.1%``), optionally after a divisor (``/1e6 .2f``: megabytes).
A file, key or format that does not resolve fails the build.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FIGURE = re.compile(r"\{\{\s*(results-[\w.-]+\.json)\s*((?:>\s*[^>|}]+?\s*)+)(?:\|\s*([^}]*?)\s*)?\}\}")


def figure(name: str, path: list[str], spec: str) -> str:
    value = json.loads((BENCHMARKS / name).read_text())
    for key in path:
        if isinstance(value, list):
            if "=" in key:
                field, wanted = key.split("=", 1)
                value = next(item for item in value if str(item.get(field)) == wanted)
            else:
                value = value[int(key)]
        else:
            value = value[key]
    divisor, _, spec = spec.rpartition(" ") if spec.startswith("/") else ("", "", spec)
    if divisor:
        value = value / float(divisor[1:])
    return format(value, spec) if spec else str(value)


def on_page_markdown(markdown: str, page, config, files) -> str:
    def replace(match: re.Match) -> str:
        name, keys, spec = match.group(1), match.group(2), match.group(3) or ""
        path = [k.strip() for k in keys.split(">")[1:]]
        try:
            return figure(name, path, spec)
        except (OSError, KeyError, IndexError, StopIteration, ValueError, TypeError) as exc:
            raise PluginError(f"{page.file.src_uri}: {match.group(0)} does not resolve ({exc!r})") from None

    return FIGURE.sub(replace, markdown)
