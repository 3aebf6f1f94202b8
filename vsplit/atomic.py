"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename over the target.

A crash or a killed process leaves either the old file or the new one, never a torn one.

Theory of operation. What a run writes holds rows, labels or scores, so a file is *created* ``0600`` (``mode``; the
umask can only narrow it) and never widened afterwards: no other account can read it, not even for an instant. The
temporary file is made with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and renamed over the target, which replaces a name and
never writes through it. Writes never follow a symbolic link: a link at the target is refused, and with ``within``
(the run folder) every folder between ``within`` and the target is opened with ``O_NOFOLLOW`` relative to its parent
(``dir_fd``), so a link planted in a run folder (``runs/r/bank/tune -> /elsewhere``) cannot lead a write out of it,
even if it appears while the write is under way. ``within`` itself may be a link: it is the user's choice. A party's
node declares its run folder once (:func:`confine`), and every later write under it is checked so without naming it
(checkpoints, PSI progress, jobs). POSIX only (``dir_fd``).

Example:
    >>> import tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> write_atomic(run / "bank" / "report.json", b'{"ok": true}', within=run)
    >>> (run / "bank" / "report.json").read_bytes(), oct((run / "bank" / "report.json").stat().st_mode & 0o777)
    (b'{"ok": true}', '0o600')
    >>> (run / "tune").symlink_to(tempfile.mkdtemp())
    >>> write_atomic(run / "tune" / "rows.csv", b"id,y", within=run)
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: refusing to write .../tune/rows.csv: .../tune is a symbolic link ...
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from vsplit.errors import ConfigError

#: what a run's files are created with: owner read and write only
PRIVATE = 0o600

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

#: the run folders declared by :func:`confine` (absolute)
_CONFINED: set[Path] = set()


def confine(folder: str | Path) -> None:
    """Check every later write under ``folder`` (a party's run folder) as ``within=folder`` would: no folder below it
    may be a symbolic link."""
    _CONFINED.add(Path(os.path.abspath(folder)))


def write_atomic(path: str | Path, data: bytes, *, mode: int = PRIVATE, within: str | Path | None = None) -> None:
    """Replace ``path`` with ``data`` atomically, the file created ``mode`` (never followed through a link; with
    ``within``, no folder between ``within`` and ``path`` may be a link)."""
    with open_atomic(path, mode=mode, within=within) as handle:
        handle.write(data)


@contextlib.contextmanager
def open_atomic(path: str | Path, *, mode: int = PRIVATE, within: str | Path | None = None) -> Iterator[BinaryIO]:
    """A binary file handle whose content replaces ``path`` only if the ``with`` block succeeds.

    The handle is a new file created ``mode`` (``0600`` by default; the umask may only narrow it). Raises
    :class:`~vsplit.errors.ConfigError` naming the link if ``path``, or a folder between ``within`` (default: the
    outermost run folder declared by :func:`confine` that holds ``path``) and ``path``, is a symbolic link, or if
    ``path`` is not inside ``within``.
    """
    path = Path(path)
    folder = _open_folder(path, within)
    try:
        _refuse_link(folder, path)
        temporary, fd = _create(folder, path.name, mode)
        try:
            with os.fdopen(fd, "wb") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            _refuse_link(folder, path)
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)  # replaces a name, follows nothing
            with contextlib.suppress(OSError):
                os.fsync(folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def save_with(path: str | Path, writer: Callable[[BinaryIO], None], *, mode: int = PRIVATE,
              within: str | Path | None = None) -> None:
    """Let ``writer`` fill a file that then replaces ``path`` atomically (e.g. ``fig.savefig``, ``np.savez``,
    ``table.to_parquet``: a library that writes to a path is given this file instead, created ``mode``)."""
    with open_atomic(path, mode=mode, within=within) as handle:
        writer(handle)


def create_private(path: str | Path, *, mode: int = PRIVATE) -> None:
    """Create ``path`` empty with ``mode`` if it does not exist, for a library that then appends to it (Optuna's
    journal); a link at ``path`` is refused."""
    path = Path(path)
    folder = _open_folder(path, None)
    try:
        _refuse_link(folder, path)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path.name, _CREATE, mode, dir_fd=folder))
    finally:
        os.close(folder)


def create_once(path: str | Path, data: bytes, *, mode: int = PRIVATE) -> bool:
    """Create ``path`` holding ``data`` unless it exists: written whole to a temporary file, then linked to ``path``,
    which never replaces a file, so of two processes making the same secret the first one's is kept; ``True`` if
    this call made it. The folder is created ``0700`` if missing.

    Example:
        >>> import tempfile, pathlib
        >>> key = pathlib.Path(tempfile.mkdtemp()) / "keys" / "k"
        >>> create_once(key, b"first"), create_once(key, b"second"), key.read_bytes()
        (True, False, b'first')
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, _CREATE, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        tmp.unlink(missing_ok=True)


def refuse_shared(path: str | Path, mode: int, *, what: str, why: str = "") -> None:
    """Refuse (:class:`ConfigError`) the secret ``what`` at ``path`` if its ``mode`` lets group or others read it
    (POSIX): a private key, a token, a seed. ``why``: what an account that reads it could do."""
    if os.name == "posix" and mode & 0o077:
        reason = f"; {why}" if why else ""
        raise ConfigError(f"{what} {path} is readable by other users (mode {oct(mode & 0o777)}){reason}: run "
                          f"`chmod 600 {path}`")


def _open_folder(path: Path, within: str | Path | None) -> int:
    """A descriptor of ``path``'s folder, made if missing; with ``within``, reached from it one real folder at a
    time."""
    if within is None:  # the outermost declared run folder holding ``path``, if any
        here = Path(os.path.abspath(path.parent))
        within = min((f for f in _CONFINED if f == here or f in here.parents), key=lambda f: len(f.parts), default=None)
    if within is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path.parent, _FOLDER)
    root = Path(os.path.abspath(within))
    try:
        parts = Path(os.path.abspath(path.parent)).relative_to(root).parts
    except ValueError:
        raise ConfigError(f"refusing to write {path}: it is outside the run folder {within}; write under it") from None
    root.mkdir(parents=True, exist_ok=True)
    fd, here = os.open(root, _FOLDER), root
    try:
        for part in parts:
            here = here / part
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
            try:
                child = os.open(part, _FOLDER | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, part):
                    raise ConfigError(_link_message(path, here, fd, part)) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _create(folder: int, name: str, mode: int) -> tuple[str, int]:
    """A new temporary file next to ``name`` in ``folder``, created ``mode``: its name and an open descriptor."""
    while True:
        temporary = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            return temporary, os.open(temporary, _CREATE, mode, dir_fd=folder)
        except FileExistsError:
            continue


def _refuse_link(folder: int, path: Path) -> None:
    if _is_link(folder, path.name):
        raise ConfigError(_link_message(path, path, folder, path.name))


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
    except FileNotFoundError:
        return False


def _link_message(path: Path, link: Path, folder: int, name: str) -> str:
    try:
        target = os.readlink(name, dir_fd=folder)
    except OSError:
        target = "?"
    return (f"refusing to write {path}: {link} is a symbolic link (to {target}) and a run never writes through a "
            "link; remove the link (or choose an output.dir without one) and run again")


__all__ = ["PRIVATE", "confine", "create_private", "open_atomic", "save_with", "write_atomic"]
