"""The search itself: an Optuna study the label party drives, one split training run per trial.

Theory of operation: the label party's sampler (TPE, seeded) draws a trial from its search space; every partner
checks the values against its own bounds (:func:`~vsplit.tune.space.check_trial`); an accepted trial trains on the
training rows' inner-train part and returns the validation AUC the label party measures on the rest of the training
rows. A refused or crashed trial is recorded as failed with its reason (``trial.user_attrs["error"]``) and the search
goes on. With ``storage`` (a journal file) the study lives on disk and a second call resumes it: trials already run
count towards ``n_trials``.

Example:
    >>> result = run_study(lambda values: -abs(values["lr"] - 1e-3), n_trials=3, seed=0,
    ...                    space={"lr": SPACE["lr"]})
    >>> len(result.trials), sorted(result.best_values)
    (3, ['lr'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vsplit.errors import ConfigError, VsplitError
from vsplit.tune.space import SPACE, Knob


@dataclass
class TuneResult:
    """What a search found: the best trial's values and validation AUC, and every trial (values, state, reason)."""

    best_values: dict[str, Any]
    best_score: float
    trials: list[dict[str, Any]] = field(default_factory=list)


#: what reading a damaged journal raises: Optuna checks little of what it replays, and asserts where it finds an
#: operation it cannot apply
UNREADABLE: tuple[type[BaseException], ...] = (ValueError, KeyError, TypeError, AttributeError, IndexError,
                                               RecursionError, OverflowError, AssertionError)


def open_study(*, storage: str | Path | None, name: str, seed: int) -> Any:
    """A maximising Optuna study, in memory or in the journal file ``storage`` (created, or resumed)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial is recorded in the result
    backend = None
    try:
        if storage is not None:
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            from vsplit.atomic import create_private

            create_private(storage)  # the trials' values and metrics: 0600 before Optuna appends to it
            drop_torn_line(Path(storage))
            backend = JournalStorage(JournalFileBackend(str(storage)))  # replays the journal
        study = optuna.create_study(study_name=name, storage=backend, direction="maximize", load_if_exists=True,
                                    sampler=optuna.samplers.TPESampler(seed=seed))
        study.get_trials(deepcopy=False)  # replays the whole journal now, here, rather than at the first trial
        return study
    except (*UNREADABLE, optuna.exceptions.OptunaError) as exc:  # a damaged journal: Optuna fails in its replay
        raise ConfigError(f"{storage}: the study journal cannot be read ({type(exc).__name__}: {str(exc)[:120]}); "
                          "move it away to start a new search, or restore it from a backup") from None


def drop_torn_line(path: Path) -> bool:
    r"""Cut a last line the journal does not end (a process stopped while appending to it): Optuna skips such a line
    when it reads, but would append its next operation to it, and that line would then break every later resume.
    Whether a line was cut.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "study.log"
    >>> _ = path.write_bytes(b'{"op_code": 0}\n{"op_co')
    >>> drop_torn_line(path), path.read_bytes()
    (True, b'{"op_code": 0}\n')
    """
    from vsplit.atomic import write_atomic

    data = path.read_bytes() if path.is_file() else b""
    if not data or data.endswith(b"\n"):
        return False
    write_atomic(path, data[: data.rfind(b"\n") + 1])
    return True


def run_study(score: Callable[[dict[str, Any]], float], *, n_trials: int, seed: int,
              space: Mapping[str, Knob] | None = None, storage: str | Path | None = None, name: str = "vsplit",
              progress: bool = False) -> TuneResult:
    """Run trials until the study holds ``n_trials`` (resumed ones count); ``score(values)`` trains and scores one.

    ``score`` raises a :class:`~vsplit.errors.VsplitError` (e.g. :class:`~vsplit.tune.space.TrialRefused`) to fail
    a trial; the reason is recorded and the search goes on.
    """
    import optuna

    space = dict(space or SPACE)
    study = open_study(storage=storage, name=name, seed=seed)

    def objective(trial: optuna.Trial) -> float:
        values = {knob: spec.suggest(trial, knob) for knob, spec in space.items()}
        try:
            return float(score(values))
        except VsplitError as exc:
            trial.set_user_attr("error", str(exc))
            raise

    todo = n_trials - len(study.trials)
    if todo > 0:
        study.optimize(objective, n_trials=todo, catch=(VsplitError,), show_progress_bar=progress)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not done:
        reasons = "; ".join(sorted({t.user_attrs.get("error", t.state.name) for t in study.trials}))
        raise VsplitError(f"no trial of the search finished ({len(study.trials)} tried): {reasons}")
    trials = [{"number": t.number, "state": t.state.name, "values": dict(t.params), "score": t.value,
               "error": t.user_attrs.get("error")} for t in study.trials]
    return TuneResult(best_values=dict(study.best_trial.params), best_score=float(study.best_value), trials=trials)
