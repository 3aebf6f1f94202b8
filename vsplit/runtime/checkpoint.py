"""Checkpoints without pickle: tensors in an ``.npz`` archive, everything else as JSON, written atomically.

A checkpoint belongs to one run and one party. Loading checks both, and refuses a checkpoint of another run or
another party with a clear error. Nested state (``state_dict()`` of models and optimizers, RNG states, counters)
is flattened: every tensor becomes an array entry named by its path, and the structure, with scalars, goes into a
JSON entry. ``numpy.load`` runs with ``allow_pickle=False``.

Example:
    >>> import tempfile, pathlib, torch
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "bank.ckpt.npz"
    >>> save_checkpoint(path, {"epoch": 3, "w": torch.ones(2)}, run_id="r1", party="bank")
    >>> load_checkpoint(path, run_id="r1", party="bank")["w"].tolist()
    [1.0, 1.0]
    >>> load_checkpoint(path, run_id="r2", party="bank")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.CheckpointError: ...belongs to run 'r1', not 'r2'; ...
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vsplit.atomic import write_atomic
from vsplit.errors import CheckpointError, UnreadableCheckpoint

FORMAT = "vsplit-checkpoint-1"


def save_checkpoint(path: str | Path, state: dict[str, Any], *, run_id: str, party: str) -> None:
    """Write ``state`` (nested dicts/lists of tensors, arrays and JSON scalars) to ``path`` atomically."""
    arrays: dict[str, np.ndarray] = {}
    tree = _flatten(state, arrays)
    meta = {"format": FORMAT, "run_id": run_id, "party": party, "tree": tree}
    buffer = io.BytesIO()
    np.savez(buffer, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    try:
        write_atomic(path, buffer.getvalue(), mode=0o600)  # on failure the previous file stays as it was
    except OSError as exc:
        raise CheckpointError(
            f"cannot write {path} ({exc.strerror or exc}): free space on that disk (or set output.dir to another "
            "folder), then restart every party with --resume; the checkpoints already written are intact"
        ) from None


def load_checkpoint(path: str | Path, *, run_id: str, party: str) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`, checking it belongs to ``run_id`` and ``party``.

    A file that is not one (truncated, altered, another format) raises :class:`UnreadableCheckpoint`; reading it
    never allocates more than the file holds (each array's declared shape is checked against its stored bytes)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}; start without --resume")

    def unreadable(why: object) -> UnreadableCheckpoint:
        return UnreadableCheckpoint(f"checkpoint {path} is unreadable ({why}); delete it and start without --resume")

    try:
        meta, arrays = _read_archive(path)
    except _UNREADABLE as exc:
        raise unreadable(exc) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"{path} is not a vsplit checkpoint ({found!r})")
    if meta.get("run_id") != run_id:
        raise CheckpointError(
            f"checkpoint {path} belongs to run {meta.get('run_id')!r}, not {run_id!r}; "
            "use the run's own folder or start without --resume"
        )
    if meta.get("party") != party:
        raise CheckpointError(f"checkpoint {path} belongs to party {meta.get('party')!r}, not {party!r}")
    try:
        state = _unflatten(meta.get("tree"), arrays)
    except _UNREADABLE as exc:
        raise unreadable(f"its structure does not match its arrays: {type(exc).__name__} {exc}") from None
    if not isinstance(state, dict):
        raise unreadable(f"it holds a {type(state).__name__}, not a state")
    return state


@contextmanager
def interpreting(path: str | Path, *, fix: str = "train again, or restore the file the run wrote") -> Iterator[None]:
    """Around code that puts a loaded state to use (``load_state_dict``, a preprocessor's ``from_state``): a state
    of the right format whose contents do not fit (a missing key, a wrong shape or type, left by damage on disk or a
    hand edit) raises :class:`UnreadableCheckpoint` naming ``path`` instead of a traceback.

    >>> with interpreting("model.npz"):  # doctest: +ELLIPSIS
    ...     {}["segments"]
    Traceback (most recent call last):
    ...
    vsplit.errors.UnreadableCheckpoint: model.npz does not hold what this party's model needs (KeyError: ...
    """
    try:
        yield
    except _CONTENT as exc:
        raise UnreadableCheckpoint(f"{path} does not hold what this party's model needs ({type(exc).__name__}: "
                                   f"{str(exc)[:300]}); {fix}") from None


# what a state's contents that do not fit the model raise while being put to use
_CONTENT = (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError, OverflowError)


# what a corrupt archive or tree can raise while being read (zipfile raises NotImplementedError for an unknown
# compression or version, json RecursionError for deep nesting; the tree's lookups KeyError, TypeError, ...)
_UNREADABLE = (OSError, EOFError, ValueError, KeyError, TypeError, IndexError, AttributeError, RuntimeError,
               zipfile.BadZipFile, NotImplementedError, RecursionError, UnicodeDecodeError)


def _read_archive(path: Path) -> tuple[Any, dict[str, np.ndarray]]:
    """The JSON meta entry and the arrays of an ``.npz`` written by :func:`save_checkpoint`, never unpickling and
    never allocating more than the file holds (:func:`vsplit.npy_files.read_npz`)."""
    from vsplit.npy_files import read_npz

    arrays = read_npz(path)
    if "__meta__" not in arrays:
        raise ValueError("no __meta__ entry")
    return json.loads(arrays.pop("__meta__").tobytes()), arrays


def _flatten(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(node, torch.Tensor):
        key = f"t{len(arrays)}"
        arrays[key] = node.detach().cpu().numpy()
        return {"__tensor__": key, "dtype": str(node.dtype).removeprefix("torch.")}
    if isinstance(node, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = node
        return {"__array__": key}
    if isinstance(node, dict):
        return {"__dict__": [[_flatten(k, arrays), _flatten(v, arrays)] for k, v in node.items()]}
    if isinstance(node, (list, tuple)):
        return {"__list__": [_flatten(v, arrays) for v in node], "tuple": isinstance(node, tuple)}
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise CheckpointError(f"cannot checkpoint a value of type {type(node).__name__}")


def _unflatten(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(node, dict):
        if "__tensor__" in node:
            dtype = getattr(torch, str(node["dtype"]), None)
            if not isinstance(dtype, torch.dtype):
                raise TypeError(f"{node['dtype']!r} is not a torch dtype")
            return torch.from_numpy(np.array(arrays[node["__tensor__"]])).to(dtype)
        if "__array__" in node:
            return arrays[node["__array__"]]
        if "__dict__" in node:
            return {_unflatten(k, arrays): _unflatten(v, arrays) for k, v in node["__dict__"]}
        if "__list__" in node:
            items = [_unflatten(v, arrays) for v in node["__list__"]]
            return tuple(items) if node["tuple"] else items
    return node


def newest_readable(found: list[Path], restore: Any, *, party: str) -> tuple[Path | None, list[str]]:
    """The newest of ``found`` (named so that they sort oldest first) that ``restore(path)`` reads, and the unreadable
    ones passed over on the way (e.g. truncated by a crash), each said as a warning on stderr and in the log;
    ``None`` if none is readable. Any other error of ``restore`` (another run's checkpoint) is raised."""
    import logging
    import sys

    from vsplit.errors import UnreadableCheckpoint

    skipped: list[str] = []
    for path in sorted(found, reverse=True):
        try:
            restore(path)
        except UnreadableCheckpoint as exc:
            skipped.append(f"{path.name} ({exc})")
            logging.getLogger(__name__).warning("%s: --resume passes over the unreadable %s", party, skipped[-1])
            print(f"vsplit: warning: {party}: --resume passes over the unreadable {path.name}", file=sys.stderr)
            continue
        return path, skipped
    return None, skipped
