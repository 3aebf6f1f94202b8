"""A tiny registry: a config string names one class; an unknown name lists the valid ones.

Example:
    >>> shapes = Registry("shape")
    >>> @shapes.register("square")
    ... class Square: ...
    >>> shapes.get("square") is Square
    True
    >>> shapes.get("circle")
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: unknown shape 'circle'; choose one of: square
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from vsplit.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to implementations of one swappable part."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def wrap(item: T) -> T:
            self._items[name] = item
            return item

        return wrap

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items))
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of: {valid}") from None

    def names(self) -> list[str]:
        return sorted(self._items)
