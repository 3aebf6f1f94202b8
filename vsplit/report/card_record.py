"""Reading ``model_card.json`` back: the card's data, checked section by section before anything renders it.

``vsplit train`` writes the record; ``vsplit explain`` reads it to add the importances and writes the card again. A
record that was edited by hand, truncated or damaged on disk gets a :class:`~vsplit.errors.DataError` naming the file,
the section and the fix, never a traceback from deep inside the rendering.

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "model_card.json"
    >>> _ = path.write_text(json.dumps({"title": "demo", "metrics": {"auc": 0.8, "auc_interval": [0.7, 0.9]}}))
    >>> read_card(path)["metrics"]["auc"]
    0.8
    >>> _ = path.write_text(json.dumps({"metrics": {"auc": "high"}}))
    >>> read_card(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.DataError: ...model_card.json: metrics.auc must be a number or null, not str; ...
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vsplit.errors import DataError

#: the largest record read (a card is a few kilobytes; importances of thousands of columns stay far below)
MAX_BYTES = 16 << 20


def _number(value: Any) -> bool:
    """None or a finite number (JSON's 1e400 reads as infinity)."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))


def _numbers(value: Any) -> bool:
    return isinstance(value, list) and all(_number(v) for v in value)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _pair(value: Any) -> bool:
    return value is None or (_numbers(value) and len(value) == 2)


def _mapping(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, dict) and all(check(v) for v in value.values())


def _curve(value: Any) -> bool:
    """None, {} or a reliability curve: as many observed rates as mean predictions, all numbers."""
    if value is None or value == {}:
        return True
    if not isinstance(value, dict):
        return False
    x, y = value.get("mean_predicted", []), value.get("observed_rate", [])
    return _numbers(x) and _numbers(y) and len(x) == len(y)


def _slices(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(s, dict) and all(k in s and _scalar(s[k]) for k in ("slice", "rows", "auc", "approval_rate"))
        for s in value)


#: what each checked value must be: (path, check, what it must be)
_SHAPE: list[tuple[tuple[str, ...], Callable[[Any], bool], str]] = [
    (("title",), lambda v: isinstance(v, str), "text"),
    (("data",), lambda v: isinstance(v, dict), "an object"),
    (("data", "rows"), _mapping(_number), "an object of row counts"),
    (("data", "intersection"), _scalar, "a number or text"),
    (("data", "test_rows"), _scalar, "a number or text"),
    (("data", "date_range"), lambda v: _scalar(v) or _texts(v), "text"),
    (("topology",), lambda v: isinstance(v, dict), "an object"),
    (("topology", "kind"), _scalar, "text"),
    (("topology", "segments"), _texts, "a list of texts"),
    (("topology", "cuts"), _texts, "a list of texts"),
    (("recipe",), _mapping(lambda v: _scalar(v) or isinstance(v, list)), "an object of settings"),
    (("metrics",), lambda v: isinstance(v, dict), "an object"),
    (("metrics", "level"), lambda v: v is not None and _number(v), "a number"),
    (("metrics", "auc"), _number, "a number or null"),
    (("metrics", "auc_interval"), _pair, "two numbers or null"),
    (("metrics", "brier"), _number, "a number or null"),
    (("metrics", "ece"), _number, "a number or null"),
    (("metrics", "ece_calibrated"), _number, "a number or null"),
    (("metrics", "curve"), _curve, "an object of number lists"),
    (("metrics", "curve_calibrated"), _curve, "an object of number lists"),
    (("importance",), _mapping(lambda v: v is not None and _number(v)), "an object of numbers"),
    (("fairness",), lambda v: v is None or isinstance(v, dict), "an object"),
    (("fairness", "column"), _scalar, "text"),
    (("fairness", "slices"), _slices, "a list of slices (slice, rows, auc, approval_rate)"),
    (("trees",), lambda v: isinstance(v, dict), "an object"),
    (("trees", "splits"), _mapping(lambda v: v is not None and _number(v)), "an object of split counts"),
    (("trees", "share"), _mapping(lambda v: v is not None and _number(v)), "an object of shares"),
    (("trees", "validation_loss"), _numbers, "a list of numbers"),
    (("privacy",), lambda v: isinstance(v, dict), "an object"),
    (("privacy", "defenses"), lambda v: v is None or _texts(v), "a list of texts"),
    (("privacy", "leakage"), _mapping(_scalar), "an object of numbers"),
    (("privacy", "notes"), _texts, "a list of texts"),
    (("limits",), _texts, "a list of texts"),
]


def check_card(card: Any, *, source: str = "the model card") -> dict[str, Any]:
    """``card`` if every section the card's renderer reads has the right shape; a :class:`DataError` naming the
    first that does not (``source``: the file, named in the error)."""
    fix = "restore the file vsplit train wrote, or train again to write a new card"
    if not isinstance(card, dict):
        raise DataError(f"{source}: a model card is a JSON object, this holds {type(card).__name__}; {fix}")
    for path, check, what in _SHAPE:
        node: Any = card
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or path[-1] not in node:
            continue  # an optional section or key that is absent
        value = node[path[-1]]
        if not check(value):
            raise DataError(f"{source}: {'.'.join(path)} must be {what}, not {type(value).__name__}; {fix}")
    fairness = card.get("fairness")
    if fairness and not ("column" in fairness and "slices" in fairness):
        raise DataError(f"{source}: fairness needs both column and slices; {fix}")
    return card


def read_card(path: Path) -> dict[str, Any]:
    """The card's data in ``path`` (``model_card.json``), checked by :func:`check_card`."""
    from vsplit.strict_json import loads_strict

    try:
        if path.stat().st_size > MAX_BYTES:
            raise DataError(f"{path}: {path.stat().st_size} bytes, more than a model card's {MAX_BYTES}; restore the "
                            "file vsplit train wrote")
        card = loads_strict(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise DataError(f"{path}: not a readable model card ({type(exc).__name__}: {exc}); restore the file "
                        "vsplit train wrote, or train again to write a new card") from None
    return check_card(card, source=str(path))


__all__ = ["MAX_BYTES", "check_card", "read_card"]
