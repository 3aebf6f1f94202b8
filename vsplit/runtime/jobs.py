"""Scoring jobs: each ``vsplit predict`` of a trained run is its own job, with its own ID, PSI state and folder.

Theory of operation. A trained run is scored many times (a daily batch, a re-score of last month's applicants), so
nothing a scoring job writes may collide with another job's: job ``<id>`` writes only under
``<output.dir>/<run_id>/<party>/predictions/<id>/`` (``predictions.csv``, ``predict.json``, ``log.txt`` and, while
its PSI runs, ``psi-state/``). A new job claims its folder by creating it (so two processes given the same ID cannot
both run), a finished job's PSI progress is deleted, and ``--resume`` continues only the job it names, from its own
kept progress: another job's state is never read. A job that stopped before keeping anything (say, its model file
was missing) may simply be run again under its ID.

The job ID names only this party's folder. Give every party the same ``--job`` (e.g. the date of a daily run) so
that the folders of one job match across organizations; to resume a killed job, rerun every party with
``--resume --job <its id>``.

Example:
    >>> import tempfile, pathlib
    >>> party = pathlib.Path(tempfile.mkdtemp())
    >>> job = PredictJob.open(party, "2026-12-04")
    >>> job.folder.relative_to(party).as_posix()
    'predictions/2026-12-04'
    >>> _ = (job.folder / "predict.json").write_text("{}")  # the job finished
    >>> PredictJob.open(party, "2026-12-04")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: predict --job 2026-12-04: this job already ran (its folder is ...); pass --resume ...
    >>> PredictJob.open(party, "../x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: predict --job '../x': a job ID is 1 to 64 letters, digits, '.', '_' or '-', ...
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from vsplit.errors import ConfigError

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FOLDER = "predictions"


def default_job_id() -> str:
    """A new job's ID when ``--job`` is not given: the UTC time to the microsecond, e.g. ``20261204T181530.123456Z``."""
    now = time.time()
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


@dataclass(frozen=True)
class PredictJob:
    """One scoring job of one party: its ID and its own folder under the party's run folder."""

    id: str
    folder: Path
    resumed: bool = False

    @classmethod
    def open(cls, party_folder: Path, job: str | None = None, *, resume: bool = False) -> PredictJob:
        """Claim the folder of job ``job`` (default: a new ID) under ``party_folder``, or, with ``resume``, reopen
        an interrupted one. Refuses an unsafe ID, a job that exists (without ``resume``), and a ``resume`` of a job
        that never started or that finished."""
        if resume and job is None:
            raise ConfigError("predict --resume needs --job <id>, the job to continue (its folder is under "
                              f"{party_folder / FOLDER})")
        job = job if job is not None else default_job_id()
        if not _ID.fullmatch(job):
            raise ConfigError(f"predict --job {job!r}: a job ID is 1 to 64 letters, digits, '.', '_' or '-', "
                              "starting with a letter or digit")
        folder = party_folder / FOLDER / job
        if resume:
            if not folder.is_dir():
                known = sorted(p.name for p in (party_folder / FOLDER).glob("*") if p.is_dir())
                raise ConfigError(f"predict --resume --job {job}: no such job under {party_folder / FOLDER} "
                                  f"(jobs there: {known or 'none'}); start it without --resume")
            if (folder / "predict.json").is_file():
                raise ConfigError(f"predict --resume --job {job}: this job finished (see {folder}); give a new --job")
            return cls(job, folder, resumed=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()  # atomic: of two processes given one new ID, one gets the folder and the other this error
        except FileExistsError:
            if (folder / "predict.json").is_file() or (folder / "psi-state").exists():
                raise ConfigError(f"predict --job {job}: this job already ran (its folder is {folder}); pass "
                                  "--resume to continue it if it was interrupted, or give a new --job") from None
            # it stopped before keeping anything (e.g. a missing model): nothing to resume, so it starts again
        return cls(job, folder)

    @property
    def psi_state(self) -> Path:
        """Where this job's resumable PSI progress is kept while it runs."""
        return self.folder / "psi-state"

    def finish(self) -> None:
        """The job succeeded: its PSI progress is no longer needed."""
        shutil.rmtree(self.psi_state, ignore_errors=True)
