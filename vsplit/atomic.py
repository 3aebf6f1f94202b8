"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename over the target.

A crash or a killed process leaves either the old file or the new one, never a torn one.

Example:
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "report.json"
    >>> write_atomic(target, b'{"ok": true}')
    >>> target.read_bytes()
    b'{"ok": true}'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO


def write_atomic(path: str | Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with open_atomic(path, mode=mode) as handle:
        handle.write(data)


@contextlib.contextmanager
def open_atomic(path: str | Path, *, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A binary file handle whose content replaces ``path`` only if the ``with`` block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def save_with(path: str | Path, writer: Callable[[BinaryIO], None], *, mode: int = 0o644) -> None:
    """Let ``writer`` fill a file that then replaces ``path`` atomically (e.g. ``fig.savefig``, ``np.savez``)."""
    with open_atomic(path, mode=mode) as handle:
        writer(handle)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
