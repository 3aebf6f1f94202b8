"""Names that become folder names: party names and run IDs, limited to a safe character set, and the run folder a
party writes to, checked to stay inside ``output.dir``.

A run writes to ``<output.dir>/<run_id>/<party>/``. A run ID or party name with ``/``, ``..`` or an absolute path
would write elsewhere, so both must be 1 to 64 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or
digit.

Example:
    >>> print(name_problem("output.run_id", "../etc"))  # doctest: +ELLIPSIS
    output.run_id: '../etc' may hold only letters, digits, '.', '_' and '-' (1 to 64, ...
    >>> name_problem("party.name", "bank") is None
    True
"""

from __future__ import annotations

import re
from pathlib import Path

from vsplit.errors import ConfigError

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def name_problem(key: str, value: object) -> str | None:
    """The problem with ``value`` as the folder name ``key`` gives (``party.name``, ``output.run_id``), or None."""
    if isinstance(value, str) and SAFE_NAME.fullmatch(value):
        return None
    return (f"{key}: {value!r} may hold only letters, digits, '.', '_' and '-' (1 to 64, starting with a letter or "
            "digit), e.g. 'pilot-2026-12-04'; it names a folder under output.dir")


def inside(base: Path, *parts: str) -> Path:
    """``base / parts...``, resolved, or a :class:`ConfigError` if it would leave ``base``.

    >>> inside(Path("/tmp/runs"), "r1", "bank").as_posix()
    '/tmp/runs/r1/bank'
    >>> inside(Path("/tmp/runs"), "..", "x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: ... leaves output.dir /tmp/runs; ...
    """
    base = base.resolve()
    path = base.joinpath(*parts).resolve()
    if not path.is_relative_to(base) or path == base:
        raise ConfigError(f"{'/'.join(parts)!r} leaves output.dir {base}; use a run ID and party name of letters, "
                          "digits, '.', '_' and '-'")
    return path


def run_folder(base: Path, run_id: str, party: str) -> Path:
    """The folder ``<base>/<run_id>/<party>`` a party writes to, after checking both names."""
    for key, value in (("output.run_id", run_id), ("party.name", party)):
        if problem := name_problem(key, value):
            raise ConfigError(problem)
    return inside(base, run_id, party)
