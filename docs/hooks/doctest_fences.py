"""griffe extension for the API reference: doctest lines in a docstring become a ``pycon`` code block, and Sphinx
roles (``:class:`~vsplit.x.Y```) become inline code.

vsplit's docstrings keep their doctests in plain text (``Example:`` paragraphs and bare ``>>>`` lines, run by
pytest's ``--doctest-modules``). Read as Markdown, ``>>> x`` lines would run together and an output such as
``['lab']`` would read as a link; fencing each run of doctest lines (prompts and their output, up to a blank line)
shows them as the session they are. Markdown has no roles, so ``:func:`x``` would print its colons.
"""

from __future__ import annotations

import re

import griffe

PROMPT = re.compile(r"^(\s*)>>> ")
ROLE = re.compile(r":(?:class|func|mod|meth|data|attr|exc|obj):`~?([^`]+)`")


def fence_doctests(text: str) -> str:
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        match = PROMPT.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match.group(1)
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


def _fence(obj: griffe.Object) -> None:
    if obj.docstring is None or "```pycon" in obj.docstring.value:  # done already
        return
    text = ROLE.sub(r"`\1`", obj.docstring.value)
    obj.docstring.value = fence_doctests(text) if ">>> " in text else text


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        _fence(obj)

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:  # the top-level package gets no on_object
        _fence(pkg)
