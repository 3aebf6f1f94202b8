"""Logging for party processes: everything at INFO and above goes to ``log.txt`` in the run folder.

Example:
    >>> import tempfile, pathlib, logging
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> with log_to_run_folder(folder):
    ...     logging.getLogger("vsplit.demo").info("hello")
    >>> "hello" in (folder / "log.txt").read_text()
    True
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def log_to_run_folder(folder: Path, *, level: int = logging.INFO) -> Iterator[Path]:
    """Send vsplit's log records to ``folder/log.txt`` for the duration of the block."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "log.txt"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("vsplit")
    previous = root.level
    root.addHandler(handler)
    root.setLevel(min(level, previous) if previous else level)
    try:
        yield path
    except BaseException as exc:
        root.exception("run failed: %s", exc)
        raise
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
        handler.close()
