"""Every fenced code block of the docs (``docs/**/*.md``) and of ``README.md`` runs, so a copy-paste never fails.

Each block is its own test, named ``page:line``:

* ``python``: executed in a fresh namespace in this process (PyTorch and pandas are already imported here, so a
  block costs its own work only), with a temporary folder as the working directory.
* ``sh``, ``bash``, ``shell``: run by ``bash -eo pipefail`` in a temporary folder holding a copy of the repository's
  ``parties/`` configs, with this virtual environment's ``bin`` first on ``PATH`` (``vsplit`` and ``python`` are
  the installed ones). ``console``: the lines after a ``$ `` prompt, the same way (the other lines are output).
* ``toml``: parsed; a block with a ``[party]`` table is a whole party config and must load with
  :func:`vsplit.config.load_config` (files are not checked: they live on the party's machine).
* ``json``: parsed. ``text``, ``csv`` and the other tags in ``DATA``: declared data, not run.

A block that cannot run here (``make demo``, a pilot on two machines, a 30-minute benchmark) is preceded by
``<!-- docs-test: skip — the reason -->``; a ``[party]`` TOML block that shows only the keys its section is about
by ``<!-- docs-test: fragment — the reason -->``. ``<!-- docs-test: file — bank/party.toml -->`` writes the block
to that path (from the section's folder) before it runs or loads: the blocks of a ``## `` section holding such a
marker all run, in page order, in one folder of their own, so a later block uses the files of the earlier ones
(docs/pilot.md's own-data section: the tables, both configs, then the commands). A block with no language tag, an
unknown tag, or a marker without a reason fails, and so does a marker that precedes no block. The API reference
(``docs/api.md``) must cover every name of ``vsplit.__all__``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PAGES = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
PYTHON = {"python", "py"}
SHELL = {"sh", "bash", "shell", "console"}
DATA = {"text", "csv", "json", "toml", "ini", "yaml", "output"}
#: what a shell block finds in its working folder: the repository's example configs
CONTEXT = ("parties",)
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>\w+)\s*(?:[—–:-]+\s*(?P<reason>.*?))?\s*-->\s*$")
KINDS = ("skip", "fragment", "file")
#: the working folder of each page section that holds a ``file`` block, shared by its blocks in page order
_SECTION_FOLDERS: dict[str, Path] = {}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    marker: str | None = None
    reason: str | None = None
    section: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(path: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a Markdown page, and the problems of its markers (``page:line: what``)."""
    lines = path.read_text().splitlines()
    page = path.relative_to(REPO).as_posix()
    found, problems, pending, section = [], [], None, ""
    i = 0
    while i < len(lines):
        marker, fence = MARKER.match(lines[i]), FENCE.match(lines[i])
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        if marker:
            if pending is not None:
                problems.append(f"{page}:{pending[0]}: docs-test marker precedes no code block")
            pending = (i + 1, marker.group("kind"), (marker.group("reason") or "").strip())
        elif fence:
            indent, mark = len(fence.group("indent")), fence.group("fence")
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not re.match(rf"^\s*{re.escape(mark[0])}{{{len(mark)},}}\s*$", lines[i]):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            kind, reason = (pending[1], pending[2]) if pending else (None, None)
            found.append(Block(page, start, fence.group("lang").lower(), "\n".join(body) + "\n", kind, reason,
                               f"{page}#{section}"))
            pending = None
        elif lines[i].strip() and pending is not None:
            problems.append(f"{page}:{pending[0]}: docs-test marker precedes no code block")
            pending = None
        i += 1
    if pending is not None:
        problems.append(f"{page}:{pending[0]}: docs-test marker precedes no code block")
    return found, problems


BLOCKS = [block for page in PAGES for block in blocks_of(page)[0]]


def test_the_pages_have_blocks_and_every_marker_belongs_to_one():
    assert len(BLOCKS) > 20
    problems = [p for page in PAGES for p in blocks_of(page)[1]]
    assert not problems, "\n".join(problems)


def test_the_parser_reads_indented_fences_markers_and_data_tags(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""\
        - a list item:

          ```python
          x = 1
          ```
        <!-- docs-test: skip — needs two machines -->

        ```sh
        make demo
        ```

        ```text
        out
        ```
        <!-- docs-test: skip -->
        """))
    found, problems = blocks_of(page)
    assert [(b.line, b.lang, b.code, b.marker, b.reason) for b in found] == [
        (3, "python", "x = 1\n", None, None),
        (8, "sh", "make demo\n", "skip", "needs two machines"),
        (12, "text", "out\n", None, None),
    ]
    assert problems == ["page.md:15: docs-test marker precedes no code block"]


def run_python(block: Block, where: Path, monkeypatch) -> None:
    monkeypatch.chdir(where)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    exec(compile(block.code, block.id, "exec"), {"__name__": "__main__"})  # the repository's own docs


def shell_script(block: Block) -> str:
    if block.lang != "console":
        return block.code
    return "\n".join(line[2:] for line in block.code.splitlines() if line.startswith("$ ")) + "\n"


def run_shell(block: Block, where: Path) -> None:
    for name in CONTEXT:
        shutil.copytree(REPO / name, where / name, ignore=shutil.ignore_patterns("data", "keys", "__pycache__"),
                        dirs_exist_ok=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg"}
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", shell_script(block)], cwd=where, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def check_toml(block: Block, where: Path) -> None:
    from vsplit.config import load_config

    try:
        tree = tomllib.loads(block.code)
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(f"{block.id}: not valid TOML: {exc}")
    if "party" in tree and block.marker != "fragment":
        config = where / block.reason if block.marker == "file" else where / "party.toml"
        config.write_text(block.code)
        load_config(config, check_files=False)


#: the sections whose blocks share a folder: those holding a ``file`` block
SHARED = {b.section for b in BLOCKS if b.marker == "file"}


def block_folder(block: Block, tmp_path: Path, factory: pytest.TempPathFactory) -> Path:
    """Where ``block`` runs: its section's shared folder (writing a ``file`` block there first), or its own."""
    if block.section not in SHARED:
        return tmp_path
    if block.section not in _SECTION_FOLDERS:
        _SECTION_FOLDERS[block.section] = factory.mktemp("section")
    where = _SECTION_FOLDERS[block.section]
    if block.marker == "file":
        target = (where / block.reason).resolve()
        assert target.is_relative_to(where.resolve()), f"{block.id}: a file block's path stays in its folder"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code)
    return where


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_code_block_runs(block: Block, tmp_path, monkeypatch, tmp_path_factory):
    if block.marker is not None:
        assert block.marker in KINDS, f"{block.id}: unknown docs-test marker {block.marker!r}; use one of {KINDS}"
        assert block.reason, f"{block.id}: a docs-test marker must say why (<!-- docs-test: {block.marker} — ... -->)"
    if block.marker == "skip":
        pytest.skip(block.reason)
    tmp_path = block_folder(block, tmp_path, tmp_path_factory)
    if not block.lang:
        pytest.fail(f"{block.id}: a code block without a language tag: tag it (python, sh, toml, text, ...)")
    if block.lang in PYTHON:
        run_python(block, tmp_path, monkeypatch)
    elif block.lang in SHELL:
        run_shell(block, tmp_path)
    elif block.lang == "toml":
        check_toml(block, tmp_path)
    elif block.lang == "json":
        json.loads(block.code)
    elif block.lang not in DATA:
        pytest.fail(f"{block.id}: unknown language tag {block.lang!r}: run it ({sorted(PYTHON | SHELL)}) or declare it"
                    f" data ({sorted(DATA)})")


def test_the_api_reference_covers_every_public_name():
    """docs/api.md documents each name of ``vsplit.__all__``: by its own ``:::`` entry, or its whole module's."""
    import vsplit

    documented = set(re.findall(r"^::: ([\w.]+)", (REPO / "docs" / "api.md").read_text(), flags=re.MULTILINE))
    missing = []
    for name in vsplit.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(vsplit, name)
        if f"{obj.__module__}.{obj.__qualname__}" not in documented and obj.__module__ not in documented:
            missing.append(f"{name} ({obj.__module__}.{obj.__qualname__})")
    assert not missing, f"docs/api.md: add a ::: entry for {', '.join(missing)}"


def test_the_readme_is_a_front_page_under_120_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 120, f"README.md has {len(lines)} lines: move detail to docs/ or CHANGELOG.md"
