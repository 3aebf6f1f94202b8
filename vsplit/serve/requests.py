"""Check an HTTP scoring request before anything is scored: its size, its JSON, its ID and every column's type.

Every refusal is a :class:`BadRequest` with an HTTP status, a code and the field it is about, e.g.
``features.age: expected a number, got the string '41'``, so a client can fix the request from the message alone.

Example:
    >>> columns = {"age": "numeric", "job": "categorical"}
    >>> row = parse_row({"id": "42", "features": {"age": 41, "job": "admin."}}, columns=columns, nulls=False)
    >>> row.id, row.features["age"]
    ('42', 41)
    >>> parse_row({"id": "42", "features": {"age": "41", "job": "x"}}, columns=columns, nulls=False)
    Traceback (most recent call last):
    ...
    vsplit.serve.requests.BadRequest: features.age: expected a number, got the string '41'
"""

from __future__ import annotations

import json
import math
from typing import Any

try:  # orjson: several times faster than json both ways, and it refuses NaN and Infinity itself
    import orjson
except ImportError:  # pragma: no cover - the serve extra installs it
    orjson = None

from vsplit.errors import VsplitError
from vsplit.serve.scorer import Row


class BadRequest(VsplitError):
    """A request refused before scoring: ``status`` (4xx), ``code``, ``field`` and the message."""

    def __init__(self, field: str, message: str, *, status: int = 422, code: str = "invalid_field") -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message, self.status, self.code = field, message, status, code

    def as_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "field": self.field, "message": str(self)}}


def parse_body(raw: bytes, *, max_bytes: int) -> Any:
    """The JSON value of ``raw``: 413 above ``max_bytes``, 400 if it is not JSON (NaN and Infinity refused)."""
    if len(raw) > max_bytes:
        raise BadRequest("body", f"{len(raw)} bytes is over the limit of {max_bytes} (serve.max_body_kb); send "
                         "fewer rows per request", status=413, code="too_large")
    try:
        if orjson is not None:
            return orjson.loads(raw)
        return json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:  # orjson's error is one too
        raise BadRequest("body", f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", status=400,
                         code="malformed_json") from None
    except UnicodeDecodeError:
        raise BadRequest("body", "not UTF-8 text", status=400, code="malformed_json") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise BadRequest("body", f"malformed JSON: {exc}", status=400, code="malformed_json") from None
    except RecursionError:
        raise BadRequest("body", "malformed JSON: nested too deeply; a request is an object of rows", status=400,
                         code="malformed_json") from None


def dumps(value: Any) -> bytes:
    """``value`` as JSON bytes (orjson when installed)."""
    if orjson is not None:
        return orjson.dumps(value)
    return json.dumps(value, separators=(",", ":")).encode()


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not a number in JSON", name, 0)


def parse_row(obj: Any, *, columns: dict[str, str], nulls: bool, where: str = "") -> Row:
    """One applicant ``{"id": ..., "features": {column: value}}``, every column checked against ``columns``
    (name -> ``numeric`` or ``categorical``); ``nulls``: whether a missing value (null) is allowed."""
    if not isinstance(obj, dict):
        raise BadRequest(where or "body", f"expected an object with \"id\" and \"features\", got {_kind(obj)}")
    for key in obj:
        if key not in ("id", "features"):
            raise BadRequest(f"{where}{key}", "unknown field; a row has \"id\" and \"features\"")
    if "id" not in obj:
        raise BadRequest(f"{where}id", "missing; give the applicant's customer ID")
    ident = obj["id"]
    if isinstance(ident, bool) or not isinstance(ident, str | int) or not str(ident).strip():
        raise BadRequest(f"{where}id", f"expected a non-empty string (or an integer), got {_kind(ident)}")
    features = obj.get("features", {})
    if not isinstance(features, dict):
        raise BadRequest(f"{where}features", f"expected an object of column: value, got {_kind(features)}")
    for name in features:
        if name not in columns:
            raise BadRequest(f"{where}features.{name}", f"unknown column; the model reads {', '.join(columns)}")
    for name, kind in columns.items():
        field = f"{where}features.{name}"
        if name not in features:
            raise BadRequest(field, f"missing; the model reads {', '.join(columns)}")
        value = features[name]
        if value is None:
            if not nulls:
                raise BadRequest(field, "null, but this model was trained without missing values (data.missing = "
                                 "\"error\")")
            continue
        if kind == "numeric":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadRequest(field, f"expected a number, got {_kind(value)}")
            if not _finite(value):
                raise BadRequest(field, "expected a finite number")
        elif isinstance(value, float) or not isinstance(value, str | int | bool):
            raise BadRequest(field, f"expected a category (a string), got {_kind(value)}")
    return Row(id=str(ident), features=features)


def parse_rows(obj: Any, *, columns: dict[str, str], nulls: bool, max_rows: int) -> list[Row]:
    """The rows of a batch request ``{"rows": [...]}`` (at most ``max_rows``)."""
    if not isinstance(obj, dict) or set(obj) != {"rows"}:
        raise BadRequest("body", "expected {\"rows\": [row, ...]}")
    rows = obj["rows"]
    if not isinstance(rows, list) or not rows:
        raise BadRequest("rows", f"expected a non-empty list of rows, got {_kind(rows)}")
    if len(rows) > max_rows:
        raise BadRequest("rows", f"{len(rows)} rows is over the limit of {max_rows} per request (serve.max_batch); "
                         "split the batch", status=413, code="too_large")
    return [parse_row(r, columns=columns, nulls=nulls, where=f"rows[{i}].") for i, r in enumerate(rows)]


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a finite number a float holds (an integer of 400 digits is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        shown = value if len(value) <= 20 else value[:20] + "..."
        return f"the string {shown!r}"
    return {bool: "a boolean", int: "an integer", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
