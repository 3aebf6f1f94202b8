"""Protocol messages: frozen dataclasses that validate themselves.

A message type is a frozen dataclass decorated with :func:`message`, which gives it a wire type code. Its fields may
be ``int``, ``float``, ``bool``, ``str`` or ``numpy.ndarray``; the codec (:mod:`vsplit.transport.codec`) turns scalars
into a small binary header and arrays into raw little-endian buffers. Messages know nothing of the wire.

Each message checks its own invariants in ``__post_init__`` (dtype, shape, ranges), so a malformed message fails
where it is built, whether locally or by the decoder from a peer's frame.

Example:
    >>> import numpy as np
    >>> from dataclasses import dataclass
    >>> @message(0x7F01)
    ... @dataclass(frozen=True)
    ... class Ping(Message):
    ...     nonce: int
    >>> Ping(nonce=3).type_code
    32513
    >>> lookup(0x7F01) is Ping
    True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, get_type_hints

import numpy as np

from vsplit.errors import ProtocolError

#: Python types a message field may have.
SCALAR_TYPES: tuple[type, ...] = (bool, int, float, str)

_REGISTRY: dict[int, type[Message]] = {}
_FIELDS: dict[type, tuple[tuple[str, type], ...]] = {}

M = TypeVar("M", bound="type[Message]")


class Message:
    """Base class of every protocol message."""

    type_code: ClassVar[int] = -1

    def __post_init__(self) -> None:  # pragma: no cover - overridden where there is something to check
        pass


def message(type_code: int) -> Callable[[M], M]:
    """Register a frozen dataclass as a message type with a unique 16-bit ``type_code``."""

    def wrap(cls: M) -> M:
        if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"{cls.__name__} must be a frozen dataclass")
        if not 0 < type_code < 0x10000:
            raise ValueError(f"type code {type_code} out of range 1..65535")
        if type_code in _REGISTRY and _REGISTRY[type_code].__qualname__ != cls.__qualname__:
            raise ValueError(f"type code {type_code:#x} already used by {_REGISTRY[type_code].__name__}")
        hints = get_type_hints(cls)
        fields = []
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            if kind not in (*SCALAR_TYPES, np.ndarray):
                raise TypeError(f"{cls.__name__}.{field.name}: unsupported field type {kind!r}")
            fields.append((field.name, kind))
        cls.type_code = type_code
        _REGISTRY[type_code] = cls
        _FIELDS[cls] = tuple(fields)
        return cls

    return wrap


def lookup(type_code: int) -> type[Message]:
    """Return the message class for ``type_code``; a :class:`ProtocolError` if there is none."""
    try:
        return _REGISTRY[type_code]
    except KeyError:
        raise ProtocolError(f"unknown message type {type_code:#06x}") from None


def fields_of(cls: type[Message]) -> tuple[tuple[str, type], ...]:
    """The ``(name, type)`` pairs of a registered message class, in declaration order."""
    return _FIELDS[cls]


def require_array(
    name: str,
    value: Any,
    *,
    dtype: np.dtype | str,
    ndim: int | None = None,
    width: int | None = None,
) -> None:
    """Check that a message field is an array of the given dtype, rank and (last-axis) width.

    >>> require_array("x", np.zeros((2, 3), np.float32), dtype="float32", ndim=2)
    >>> require_array("x", np.zeros(2), dtype="float32")
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: field 'x' must have dtype float32, got float64
    """
    if not isinstance(value, np.ndarray):
        raise ProtocolError(f"field {name!r} must be an array, got {type(value).__name__}")
    if value.dtype != dtype:
        raise ProtocolError(f"field {name!r} must have dtype {np.dtype(dtype)}, got {value.dtype}")
    if ndim is not None and value.ndim != ndim:
        raise ProtocolError(f"field {name!r} must have {ndim} dimensions, got shape {value.shape}")
    if width is not None and (value.ndim == 0 or value.shape[-1] != width):
        raise ProtocolError(f"field {name!r} must have last dimension {width}, got shape {value.shape}")


def all_finite(values: np.ndarray) -> bool:
    """Whether a float array holds no NaN and no infinity, cheaply (it runs twice per training step).

    A NaN or an infinity makes the dot product of the array with itself NaN or infinite, so a finite result proves
    the array finite; only when it is not (a NaN, an infinity, or huge values whose squares overflow) does the
    exact element-wise check decide. A BLAS dot product is a single call, where a numpy ufunc first called after
    torch work costs several times more.

    >>> all_finite(np.array([1.0, 3e38, 3e38], np.float32)), all_finite(np.array([1.0, np.nan], np.float32))
    (True, False)
    """
    return math.isfinite(np.vdot(values, values)) or bool(np.isfinite(values).all())


def all_within(values: np.ndarray, bound: float) -> bool:
    """Whether every value of a float array is at most ``bound`` in magnitude (and finite), cheaply as
    :func:`all_finite`: the square root of the dot product bounds the largest magnitude from above.

    >>> all_within(np.array([1.0, -3.0], np.float32), 3.0), all_within(np.array([1.0, 3e38], np.float32), 1e4)
    (True, False)
    """
    total = float(np.vdot(values, values))
    if math.isfinite(total) and math.sqrt(total) <= bound:
        return True
    return bool(np.isfinite(values).all()) and (values.size == 0 or float(np.abs(values).max()) <= bound)


def require(condition: bool, text: str) -> None:
    """Raise :class:`ProtocolError` with ``text`` unless ``condition`` holds."""
    if not condition:
        raise ProtocolError(text)
