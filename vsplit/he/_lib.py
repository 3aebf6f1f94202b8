"""The one place that imports sf-heu (the ``heu`` module), so ``import vsplit`` and ``import vsplit.he`` stay light.

Example:
    >>> from vsplit.he._lib import heu_available
    >>> isinstance(heu_available(), bool)
    True
"""

from __future__ import annotations

from types import ModuleType

from vsplit.errors import ConfigError

_HINT = "the homomorphic layer needs sf-heu: run `pip install 'vsplit[he]'` (sf-heu 0.5.2b0, CPython 3.11 x86_64)"


def heu_available() -> bool:
    """Whether sf-heu can be imported here (without importing it when it is missing)."""
    import importlib.util

    return importlib.util.find_spec("heu") is not None


def heu_modules() -> tuple[ModuleType, ModuleType]:
    """Return ``(heu.phe, heu.numpy)``, importing them on first use.

    Raises:
        ConfigError: sf-heu is not installed; the message names `pip install 'vsplit[he]'`.
    """
    try:
        from heu import numpy as hnp
        from heu import phe
    except ImportError as exc:  # pragma: no cover - exercised when sf-heu is missing
        raise ConfigError(_HINT) from exc
    return phe, hnp
