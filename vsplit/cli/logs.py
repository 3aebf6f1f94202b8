"""Logging for party processes: everything at INFO and above goes to ``log.txt`` in the run folder.

The file is capped: past ``max_mb`` (``output.log_max_mb``) it is rotated to ``log.txt.1`` (and that one to
``log.txt.2``, the oldest dropped), so a party never holds more than three times the cap of log on the disk that
also holds its checkpoints and model. Refused connections are logged at a bounded rate besides
(:mod:`vsplit.transport.refusals`).

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
import logging.handlers
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

#: Rotated files kept besides ``log.txt``.
BACKUPS = 2


class _RunLog(logging.handlers.RotatingFileHandler):
    """``log.txt``; when it cannot be written (a full disk) that is said once on stderr, not with a traceback per
    record, and the run goes on (it stops with a clear error if it cannot write what it must: a checkpoint)."""

    failed = False

    def _open(self) -> TextIO:
        """``log.txt`` created 0600 like every file of a run (the umask cannot widen it), never through a link."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        return open(os.open(self.baseFilename, flags, 0o600), "a", encoding=self.encoding, errors=self.errors)

    def handleError(self, record: logging.LogRecord) -> None:
        if not self.failed:
            self.failed = True
            exc = sys.exc_info()[1]
            why = getattr(exc, "strerror", None) or exc
            print(f"vsplit: warning: cannot write {self.baseFilename} ({why}); log records are dropped",
                  file=sys.stderr)


@contextlib.contextmanager
def log_to_run_folder(folder: Path, *, level: int = logging.INFO, max_mb: float = 10.0) -> Iterator[Path]:
    """Send vsplit's log records to ``folder/log.txt`` for the duration of the block, rotated past ``max_mb``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "log.txt"
    handler = _RunLog(path, maxBytes=max(1, int(max_mb * (1 << 20))), backupCount=BACKUPS)
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
        try:
            handler.close()
        except OSError:  # the last records could not be flushed (a full disk)
            handler.handleError(logging.makeLogRecord({}))
