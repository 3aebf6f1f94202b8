"""Lazy package attributes (PEP 562): a package names what it exports, and each is imported on first use.

``import vsplit`` then costs milliseconds instead of the seconds it takes to import PyTorch, pandas and
scikit-learn, and a PSI worker process that only needs the curve arithmetic never loads them. A package keeps a
table ``{public name: "module:attribute"}`` and installs the two module hooks::

    __getattr__, __dir__ = lazy_attributes(__name__, {"SplitClassifier": "vsplit.estimator:SplitClassifier"})

A name that is also a submodule's name (``vsplit.privacy.audit``, the function in the module of that name) keeps
meaning the function: importing the submodule would otherwise bind the module on the package.

Example:
    >>> getattr_, dir_ = lazy_attributes("vsplit.errors", {"Json": "json:JSONDecoder"})
    >>> getattr_("Json").__name__, "Json" in dir_()
    ('JSONDecoder', True)
    >>> getattr_("Missing")
    Traceback (most recent call last):
    ...
    AttributeError: module 'vsplit.errors' has no attribute 'Missing'
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for the lazily imported names of ``table``."""

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)  # later look-ups skip this hook
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    shadowed = frozenset(name for name, target in table.items() if target == f"{package}.{name}:{name}")
    if shadowed:
        module = sys.modules[package]
        module.__class__ = type("LazyPackage", (_KeepsAttributes,), {"_shadowed": shadowed})
    return __getattr__, __dir__


class _KeepsAttributes(types.ModuleType):
    """A package whose names in ``_shadowed`` stay the attribute of the submodule of the same name."""

    _shadowed: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._shadowed and isinstance(value, types.ModuleType):
            value = getattr(value, name)  # the import system binds a loaded submodule on its package
        super().__setattr__(name, value)
