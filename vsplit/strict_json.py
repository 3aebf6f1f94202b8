"""Strict JSON for every file vsplit writes: a non-finite number becomes ``null``, never the bare ``NaN`` or
``Infinity`` tokens that Python's :mod:`json` writes by default and strict parsers (JavaScript, Go, jq) reject.

Example:
    >>> dumps({"loss": float("inf"), "auc": float("nan"), "rows": (1, 2)}, indent=None)
    '{"loss": null, "auc": null, "rows": [1, 2]}'
    >>> loads_strict('{"loss": Infinity}')
    Traceback (most recent call last):
    ...
    ValueError: not strict JSON: the bare token Infinity
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float (also in numpy scalars, lists, tuples and dicts) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    if isinstance(value, np.generic):
        return finite_or_none(value.item())
    return value


def dumps(value: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None, **options: Any) -> str:
    """:func:`json.dumps` of :func:`finite_or_none` of ``value``, refusing any non-finite number left over."""
    def fallback(obj: Any) -> Any:
        if default is None:
            raise TypeError(f"{type(obj).__name__} is not JSON serializable")
        return finite_or_none(default(obj))

    return json.dumps(finite_or_none(value), indent=indent, default=fallback, allow_nan=False, **options)


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON as a strict parser does: ``NaN``, ``Infinity`` and ``-Infinity`` are errors."""
    def refuse(token: str) -> Any:
        raise ValueError(f"not strict JSON: the bare token {token}")

    return json.loads(text, parse_constant=refuse)


__all__ = ["dumps", "finite_or_none", "loads_strict"]
