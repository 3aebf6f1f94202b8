"""The one-file HTML version of a report: ``report.md`` rendered with Python-Markdown, every picture inline.

Each ``![name](file.png)`` of the Markdown becomes an ``<img>`` whose source is the PNG itself (base64), so the
HTML file can be mailed or archived alone. Written atomically beside ``report.md``.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "report.md").write_text("# Run\\n\\n| a | b |\\n| --- | --- |\\n| 1 | 2 |\\n")
    >>> html = write_html_report(folder / "report.md").read_text()
    >>> "<table>" in html and "<h1>Run</h1>" in html
    True
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from vsplit.atomic import write_atomic

_IMAGE = re.compile(r'<img alt="([^"]*)" src="([^"]+\.png)"')
_STYLE = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
          "table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #ccc;padding:.25rem .6rem}"
          "td{text-align:right}td:first-child{text-align:left}img{max-width:100%;margin:.5rem}"
          "blockquote{border-left:4px solid #e0a800;margin:0;padding:.2rem 1rem;background:#fff8e1}")


def write_html_report(markdown_path: Path, name: str = "report.html") -> Path:
    """Render ``markdown_path`` (a ``report.md``) to ``name`` beside it, pictures inline; return its path."""
    import markdown

    folder = markdown_path.parent
    body = markdown.markdown(markdown_path.read_text(encoding="utf-8"), extensions=["tables"])

    def inline(match: re.Match[str]) -> str:
        picture = folder / match.group(2)
        if not picture.is_file():
            return match.group(0)
        data = base64.b64encode(picture.read_bytes()).decode("ascii")
        return f'<img alt="{match.group(1)}" src="data:image/png;base64,{data}"'

    body = _IMAGE.sub(inline, body)
    title = html.escape(markdown_path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip())
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"<style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")
    path = folder / name
    write_atomic(path, page.encode("utf-8"))
    return path
