"""Load the model a user names on the command line (``MODULE:CALLABLE``) and make example inputs for it.

``MODULE`` is an importable module (``mypkg.models``) or a path to a ``.py`` file; importing it runs that file's
code, which is the user's own code named on their own command line (never anything from a peer). ``CALLABLE`` is
called with the ``--model-arg`` keyword arguments and must return an ``nn.Module``.

Example:
    >>> parse_shape("1,3,64,64")
    ((1, 3, 64, 64), 'float32')
    >>> parse_shape("8,9:int64")
    ((8, 9), 'int64')
    >>> parse_model_args(["width=64", "name=tiny", "flags=[1, 2]"])
    {'width': 64, 'name': 'tiny', 'flags': [1, 2]}
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from vsplit.errors import ConfigError

_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32")


def parse_shape(text: str) -> tuple[tuple[int, ...], str]:
    """``"1,3,64,64"`` or ``"8,9:int64"``: the shape and the dtype of one example input."""
    dims, _, dtype = text.partition(":")
    dtype = dtype or "float32"
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise ConfigError(f"--input-shape {text!r}: give positive integers separated by commas, e.g. 1,3,64,64")
    if dtype not in _DTYPES:
        raise ConfigError(f"--input-shape {text!r}: unknown dtype {dtype!r}; use one of {list(_DTYPES)}")
    return shape, dtype


def parse_model_args(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; each value is read as JSON when it parses (numbers, lists, true), else as a string."""
    kwargs: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(f"--model-arg {item!r}: write KEY=VALUE, e.g. --model-arg width=64")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def _import(module: str) -> Any:
    if module.endswith(".py") or "/" in module:
        path = Path(module)
        if not path.is_file():
            raise ConfigError(f"--model: no file {module!r}; give MODULE:CALLABLE with a .py file that exists")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, loaded)
        spec.loader.exec_module(loaded)
        return loaded
    return importlib.import_module(module)


def load_model(spec: str, kwargs: dict[str, Any]) -> Any:
    """The ``nn.Module`` that ``CALLABLE(**kwargs)`` of ``MODULE`` returns (see the module docstring)."""
    import torch

    module_name, sep, attribute = spec.rpartition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"--model {spec!r}: write MODULE:CALLABLE, e.g. vsplit.models.tabular:TabularMLP")
    try:
        module = _import(module_name)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module failed to import: say which and why
        raise ConfigError(
            f"--model {spec!r}: cannot import {module_name!r} ({type(exc).__name__}: {exc}); "
            "check the module is on PYTHONPATH (or give a path to a .py file)"
        ) from exc
    factory = getattr(module, attribute, None)
    if not callable(factory):
        names = sorted(n for n in vars(module) if callable(getattr(module, n)) and not n.startswith("_"))
        raise ConfigError(f"--model {spec!r}: {module_name!r} has no callable {attribute!r}; it has {names[:20]}")
    try:
        model = factory(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"--model {spec!r}: calling {attribute}(**{kwargs}) failed: {exc}; fix --model-arg") from exc
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"--model {spec!r}: {attribute} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def example_inputs(shapes: list[tuple[tuple[int, ...], str]], *, batch: int | None, seed: int) -> tuple:
    """Random inputs of the given shapes (the first dimension replaced by ``batch`` when given), seeded.

    Floating inputs are standard normal; integer inputs are 0 or 1 (valid codes for any embedding).
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    inputs = []
    for shape, dtype in shapes:
        size = (batch, *shape[1:]) if batch else shape
        kind = getattr(torch, dtype)
        if kind.is_floating_point:
            inputs.append(torch.randn(size, generator=generator).to(kind))
        else:
            inputs.append(torch.randint(0, 2, size, generator=generator, dtype=kind))
    return tuple(inputs)
