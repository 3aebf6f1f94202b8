"""Which trained runs the bank's service may serve, checked before anything is read or prepared for them.

A model version is a trained run by its ID. Before ``POST /v1/models`` (or :meth:`Scorer.load`) reads the bank's
table and builds a model, :func:`run_problem` checks, from the run folder alone, that the ID is a safe folder name,
that ``<output.dir>/<run_id>/<party>/model.npz`` exists inside ``output.dir`` (no symlink out of it), and that the
file's own record names this run, this party and the label role. Its answer never holds a filesystem path: it goes
back to an HTTP client.

Example (the ID is checked first, before the config is looked at):
    >>> print(run_problem(None, "../etc"))  # doctest: +ELLIPSIS
    run_id: '../etc' may hold only letters, digits, '.', '_' and '-' ...
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from vsplit.config import PartyConfig, resolve
from vsplit.config.names import name_problem, run_folder
from vsplit.errors import ConfigError

#: the record of a model file is a few KiB; far more is not one
MAX_META = 1 << 20


def run_problem(config: PartyConfig, run_id: Any) -> str | None:
    """Why run ``run_id`` is not one this service may serve (a message without any path), or ``None``."""
    if problem := name_problem("run_id", run_id):
        return problem
    me = config.party.name
    unknown = (f"run_id: no trained model of run {run_id!r} for {me} here; check the ID (GET /v1/models lists the "
               "loaded ones) or train the run first")
    base = resolve(config, config.output.dir).resolve()
    try:
        folder = run_folder(base, run_id, me)
    except ConfigError:
        return unknown
    model = folder / "model.npz"
    if not model.is_file() or not model.resolve().is_relative_to(base):
        return unknown
    meta = _record(model)
    if meta is None:
        return f"run_id: the model file of run {run_id!r} is not a vsplit model; train the run again"
    if meta.get("run_id") != run_id or meta.get("party") != me or _role(meta) != "label":
        return f"run_id: the model file of run {run_id!r} is not {me}'s label-party model of that run"
    return None


def check_run(config: PartyConfig, run_id: str) -> None:
    """:func:`run_problem` as a :class:`ConfigError`."""
    if problem := run_problem(config, run_id):
        raise ConfigError(problem)


def _record(path: Path) -> dict[str, Any] | None:
    """The JSON record (``__meta__``) of the checkpoint ``path``, reading nothing else of it; ``None`` if unreadable."""
    from vsplit.npy_files import read_npy

    try:
        size = path.stat().st_size
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("__meta__.npy")
            if info.compress_type != zipfile.ZIP_STORED or info.file_size > min(size, MAX_META):
                return None
            meta = json.loads(read_npy(io.BytesIO(archive.read(info)), info.file_size).tobytes())
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return meta if isinstance(meta, dict) else None


def _role(meta: dict[str, Any]) -> Any:
    """The ``role`` a checkpoint's record holds (its tree is ``{"__dict__": [[key, value], ...]}``)."""
    tree = meta.get("tree")
    pairs = tree.get("__dict__") if isinstance(tree, dict) else None
    if not isinstance(pairs, list):
        return None
    return next((v for pair in pairs if isinstance(pair, list) and len(pair) == 2 and pair[0] == "role"
                 for v in [pair[1]]), None)
