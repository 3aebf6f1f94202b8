"""Every message type of every protocol has its own type code, so one process can hold them all (a party that
trains, explains and serves imports every family)."""

from __future__ import annotations

import ast
import importlib
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vsplit"


def _registered() -> dict[str, list[int]]:
    """Module name -> the type codes its ``@message(...)`` decorators give, read from the source."""
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        codes = [d.args[0].value for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                 for d in node.decorator_list
                 if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "message" and d.args
                 and isinstance(d.args[0], ast.Constant)]
        if codes:
            module = ".".join(("vsplit", *path.relative_to(PACKAGE).with_suffix("").parts))
            found[module] = codes
    return found


def test_no_two_message_types_share_a_type_code() -> None:
    found = _registered()
    assert len(found) >= 5, found  # PSI, training, secure aggregation, horizontal, serving, explanation, ...
    counts = Counter(code for codes in found.values() for code in codes)
    shared = {hex(c): [m for m, codes in found.items() if c in codes] for c, n in counts.items() if n > 1}
    assert not shared, f"type codes used twice: {shared}"


def test_every_message_module_imports_in_one_process() -> None:
    for module in _registered():
        importlib.import_module(module)  # the registry raises on a code taken by another type
