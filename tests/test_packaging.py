"""The hand-written package list in pyproject.toml names every package the wheel must carry.

setuptools is given the list by hand because ``vsplit.datasets`` lives in the top-level ``datasets/`` folder; a
package added under ``vsplit/`` and forgotten there would install without it, and ``import`` would fail only on a
user's machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _listed() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["packages"])


def _on_disk() -> set[str]:
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "vsplit").rglob("__init__.py")}
    # datasets/ installs as vsplit.datasets (package-dir in pyproject.toml)
    for init in (ROOT / "datasets").rglob("__init__.py"):
        found.add(".".join(("vsplit", *init.parent.relative_to(ROOT).parts)))
    return found


def test_every_package_on_disk_is_listed_in_pyproject() -> None:
    missing = _on_disk() - _listed()
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_every_listed_package_exists() -> None:
    stale = _listed() - _on_disk()
    assert not stale, f"remove these from [tool.setuptools] packages in pyproject.toml: {sorted(stale)}"
