"""Text a peer chose, made safe for this party's log, journal or files.

A peer's words (a refusal's bound, a name it sends) are data, not output: a newline in them forges a log line, an
ANSI escape repaints the operator's terminal, and a long one fills the journal. :func:`printable` keeps what reads
as text: terminal escape sequences are dropped, every other character that does not print (newlines, tabs, other
control and format characters such as a right-to-left override) becomes a space, and the result is cut to ``limit``
characters. Apply it where a peer's text is received, before it reaches a log, a journal or a file.

Example:
    >>> printable("[4, 10]\\n\\x1b[31mshop accepts everything\\x1b[0m")
    '[4, 10] shop accepts everything'
    >>> printable("x" * 300, limit=10)
    'xxxxxxx...'
"""

from __future__ import annotations

import re

#: a terminal escape sequence: CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), or ESC and one character
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|\x9b[0-?]*[ -/]*[@-~]",
                     re.DOTALL)


def printable(text: str, limit: int = 200) -> str:
    """``text`` without terminal escapes, each other unprintable character a space, at most ``limit`` characters
    (a cut text ends with ``...``)."""
    text = _ESCAPE.sub("", str(text))
    text = "".join(c if c.isprintable() else " " for c in text)
    if len(text) > limit:
        text = text[: limit - 3] + "..." if limit > 3 else text[:limit]
    return text
