"""A party's ready-to-run config of the best trial: its own ``party.toml`` with the trial's values set.

Paths in the new file are made absolute (the file lives in the run folder, not beside the original), so
``vsplit train --config runs/<run>/<party>/tune/best.toml`` trains the chosen recipe on all the training rows.

Example:
    >>> print(dumps_toml({"party": {"name": "bank"}, "model": {"bottom_hidden": [48], "dropout": 0.1},
    ...                   "network": {"peers": {"shop": "/keys/shop.pem"}}}), end="")
    [party]
    name = "bank"
    <BLANKLINE>
    [model]
    bottom_hidden = [48]
    dropout = 0.1
    <BLANKLINE>
    [network]
    peers = { shop = "/keys/shop.pem" }
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vsplit.atomic import write_atomic
from vsplit.config.load import apply_override, resolve
from vsplit.config.schema import PartyConfig
from vsplit.tune.settings import config_overrides

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: config keys that hold a path (relative to the config's folder), and tables whose every value is one
PATH_KEYS = (("data", "path"), ("data", "test_path"), ("network", "key"), ("network", "cert"), ("output", "dir"),
             ("tune", "study"))
PATH_TABLES = (("network", "peers"), ("network", "client_certs"))
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def best_config(config: PartyConfig, values: Mapping[str, Any], *, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """``config``'s file (with the command line's ``--set`` ``overrides``) with ``values`` set and paths absolute."""
    raw = tomllib.loads(Path(config.source).read_text())
    for item in overrides:
        apply_override(raw, item)
    for key, value in config_overrides(config, values).items():
        section, name = key.split(".")
        raw.setdefault(section, {})[name] = value
    for section, name in PATH_KEYS:
        if raw.get(section, {}).get(name):
            raw[section][name] = str(resolve(config, raw[section][name]))
    for section, name in PATH_TABLES:
        table = raw.get(section, {}).get(name) or {}
        for peer, path in table.items():
            table[peer] = str(resolve(config, path))
    return raw


def write_best(path: Path, config: PartyConfig, values: Mapping[str, Any], *, overrides: Sequence[str] = (),
               note: str = "") -> Path:
    """Write :func:`best_config` as TOML to ``path``, atomically (``note``: a comment line at the top)."""
    raw = best_config(config, values, overrides=overrides)
    text = (f"# {note}\n" if note else "") + dumps_toml(raw)
    if tomllib.loads(text) != raw:  # the writer below covers what a party config holds; never write a changed one
        raise ValueError(f"{path}: the config did not survive its TOML round trip")
    write_atomic(path, text.encode())
    return path


def dumps_toml(raw: Mapping[str, Any]) -> str:
    """A party config's tables as TOML: one ``[table]`` per section, nested tables inline."""
    blocks = []
    plain = [f"{_key(k)} = {_value(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    if plain:
        blocks.append("\n".join(plain))
    for name, table in raw.items():
        if isinstance(table, dict):
            lines = [f"[{_key(name)}]", *(f"{_key(k)} = {_value(v)}" for k, v in table.items())]
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _key(name: str) -> str:
    return name if _BARE.fullmatch(name) else json.dumps(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no TOML form")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }" if value else "{}"
    raise ValueError(f"{value!r} has no TOML form here")
