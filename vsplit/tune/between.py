"""``vsplit tune`` at one organization: the label party runs the study, each partner answers it within its bounds.

Theory of operation. Every party runs its own process with its own config. The label party holds an Optuna study
(a journal file, resumed when it exists); for each trial it asks the study for values, opens its mutual-TLS links,
and runs a round (:mod:`vsplit.tune.rounds`): the values go to every partner, each answers within the bounds of its
own ``[tune]`` table, and the label party decides. A trial nobody refused trains over the same links
(:class:`~vsplit.tune.trial.TrialNode`, the party's usual program on the training rows) and the label party scores
it on its validation rows; the study records the AUC, or the refusal or the crash as a failed trial with its reason,
and the search goes on. Links are opened again for every trial, so a crashed trial leaves nothing behind. A last
round tells the partners the best trial; each party then writes its ready-to-run ``tune/best.toml`` and its
``tune/tune.json``. A partner accepts that end only for a trial it trained, with the values it trained, within its
bounds (:func:`~vsplit.tune.rounds.check_end`); it remembers the trials it trained in its ``tune.json``, so a
resumed search may end on a trial of an earlier run. A partner's words (its refusal's bound) reach the label party's
log, journal and ``tune.json`` only as :func:`~vsplit.protocol.text.printable` text.

``connect`` (default: the party's mutual-TLS links) lets tests join the parties by in-memory channels. ``console``
(a :class:`~vsplit.console.state.ConsoleState`, ``vsplit tune --console``) is handed each round's and each trial's
pump and a :class:`~vsplit.tune.progress.SearchProgress` the loop updates once per trial.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vsplit.config import PartyConfig, resolve
from vsplit.errors import ConfigError, VsplitError
from vsplit.node.links import open_links, plan_links
from vsplit.node.node import session_id
from vsplit.protocol.text import printable
from vsplit.runtime.pump import Pump
from vsplit.transport.channel import Channel
from vsplit.tune.best import write_best
from vsplit.tune.messages import decode_values
from vsplit.tune.progress import SearchProgress, TrialConsole
from vsplit.tune.rounds import AnswerRound, EndRound, Proposed, ProposeRound, check_end
from vsplit.tune.settings import bounds_of, space_of, tune_checks
from vsplit.tune.space import LIMITS, check_trial
from vsplit.tune.trial import TrialNode, trial_config, trial_run_id, tune_folder

log = logging.getLogger(__name__)
Connect = Callable[[], dict[str, Channel]]


@dataclass
class TuneOutcome:
    """What a party's search left: the best trial (``None``: none finished), every trial, and the files written."""

    party: str
    best: dict[str, Any] | None
    trials: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def tune(config: PartyConfig, *, progress: bool = True, overrides: Sequence[str] = (),
         connect: Connect | None = None, console: Any = None) -> TuneOutcome:
    """Run this party's side of the search (``overrides``: the command line's ``--set``, kept in best.toml;
    ``console``: the party's console state, if one watches)."""
    problems = tune_checks(config)
    if problems:
        raise ConfigError(f"{config.source}: " + "; ".join(problems))
    if config.topology.kind != "vertical":
        raise ConfigError(f"topology.kind: vsplit tune searches vertical splits, not {config.topology.kind!r}")
    # links of their own for every round: a resumable link would outlive its round (a dropped trial fails instead)
    config = dataclasses.replace(config, network=dataclasses.replace(config.network, reconnect_timeout_s=0.0))
    connect = connect or (lambda: open_links(config, plan_links(config))[0])
    runner = _label if config.party.role == "label" else _partner
    return runner(config, progress=progress, overrides=overrides, connect=connect, console=console)


def _round_pump(config: PartyConfig, channels: dict[str, Channel], console: Any = None) -> Pump:
    """The pump of a round (one session for every round: each round runs on channels of its own), shown on the
    ``console`` if one watches."""
    pump = Pump(config.party.name, channels, session=session_id(config.output.run_id + ":tune"),
                timeout=config.network.read_timeout_s)
    if console is not None:
        console.watch_run(channels=pump.channels, pump=pump)
    return pump


def _close(channels: dict[str, Channel]) -> None:
    for channel in channels.values():
        channel.close()


def _train(config: PartyConfig, values: dict[str, Any], number: int, channels: dict[str, Channel],
           console: Any = None) -> dict[str, Any]:
    """Train trial ``number`` over ``channels`` (closed after); a node that cannot be built tells the peers a code."""
    try:
        node = TrialNode(trial_config(config, values, number=number), progress=False)
    except BaseException as exc:
        Pump(config.party.name, channels, session=session_id(trial_run_id(config, number))).fail(exc)
        _close(channels)
        raise
    if console is not None:  # it shows the trial's stages, peers and traffic as for `vsplit train`
        node.console = TrialConsole(console)
    return node.run(channels)


def _bar(config: PartyConfig, progress: bool, **options: Any) -> Any:
    from tqdm.auto import tqdm

    return tqdm(desc=f"{config.party.name} tune", unit="trial", disable=not progress, **options)


def _label(config: PartyConfig, *, progress: bool, overrides: Sequence[str], connect: Connect,
           console: Any = None) -> TuneOutcome:
    import optuna

    from vsplit.tune.study import open_study

    t, me, partners = config.tune, config.party.name, list(config.network.peers)
    folder = tune_folder(config)
    storage = resolve(config, t.study) if t.study else folder / "study.log"
    study = open_study(storage=storage, name=config.output.run_id, seed=t.seed)
    for stale in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(stale.number, state=optuna.trial.TrialState.FAIL)  # the label party stopped during it
    space = space_of(config)
    initial = min(len(study.trials), t.n_trials)
    bar = _bar(config, progress, total=t.n_trials, initial=initial)
    shown = SearchProgress(total=t.n_trials, done=initial)
    if console is not None:
        console.watch_progress(shown.read)
    try:
        while len(study.trials) < t.n_trials:
            trial = study.ask()
            values = {knob: spec.suggest(trial, knob) for knob, spec in space.items()}
            began = time.perf_counter()
            auc, error, stages = _label_trial(config, partners, trial.number, values, connect, console)
            trial.set_user_attr("seconds", {"total": round(time.perf_counter() - began, 3), **stages})
            if error is None:
                study.tell(trial, auc)
            else:
                trial.set_user_attr("error", error)
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                log.warning("%s: trial %d failed: %s", me, trial.number, error)
            best = _best(study)
            bar.set_postfix({"best_auc": f"{best['auc']:.4f}"} if best else {}, refresh=False)
            bar.update(1)
            shown.trial_ended(best_auc=best["auc"] if best else None)
    finally:
        bar.close()
    trials = [{"number": s.number, "state": s.state.name, "values": dict(s.params), "auc": s.value,
               "error": s.user_attrs.get("error", None if s.state.name == "COMPLETE" else "interrupted"),
               "seconds": s.user_attrs.get("seconds")} for s in study.trials]
    best = _best(study)
    channels = connect()
    try:
        scores = {s["number"]: s["auc"] for s in trials if s["state"] == "COMPLETE"}
        _round_pump(config, channels, console).run(EndRound(partners, best=best["number"] if best else -1,
                                                   values=best["values"] if best else {},
                                                   auc=best["auc"] if best else 0.0, scores=scores))
    finally:
        _close(channels)
    return _write(config, folder, best, trials, overrides, extra={"study": str(storage), "n_trials": t.n_trials,
                                                                 "space": {k: _show(v) for k, v in space.items()}})


def _label_trial(config: PartyConfig, partners: list[str], number: int, values: dict[str, Any],
                 connect: Connect, console: Any = None) -> tuple[float | None, str | None, dict[str, float]]:
    """One trial at the label party: ``(validation AUC, None, seconds per stage)``, or ``(None, why it failed,
    {})``."""
    channels = connect()
    try:
        pump = _round_pump(config, channels, console)
        proposed: Proposed = pump.run(ProposeRound(partners, number=number, values=values))
    except BaseException:
        _close(channels)
        raise
    if not proposed.go:  # each refusal names a partner's bound: its text, made printable and short
        _close(channels)
        return None, printable("; ".join(proposed.refusals[p] for p in sorted(proposed.refusals)), limit=600), {}
    try:
        result = _train(config, values, number, channels, console)
    except Exception as exc:  # a crashed trial is recorded, not fatal
        return None, printable(f"crashed: {exc}", limit=600), {}
    return float(result["auc"]), None, result["seconds"]


def _partner(config: PartyConfig, *, progress: bool, overrides: Sequence[str], connect: Connect,
             console: Any = None) -> TuneOutcome:
    me, bounds, trials = config.party.name, bounds_of(config), []
    folder = tune_folder(config)
    trained = _trained_before(folder)  # a resumed search may end on a trial this party trained in an earlier run
    bar = _bar(config, progress)
    shown = SearchProgress(total=None)  # a partner is not told the study's size, nor its scores before the end
    if console is not None:
        console.watch_progress(shown.read)
    try:
        while True:
            channels = connect()
            try:
                outcome = _round_pump(config, channels, console).run(AnswerRound(me, bounds=bounds, trained=trained))
            except BaseException:
                _close(channels)
                raise
            if not isinstance(outcome, Proposed):
                _close(channels)
                break
            record = {"number": outcome.number, "values": outcome.values, "state": "COMPLETE", "error": None}
            if not outcome.go:
                _close(channels)
                record.update(state="FAIL", error=outcome.refusals.get(me, "refused by another party"))
            else:
                try:
                    _train(config, outcome.values, outcome.number, channels, console)
                    trained[outcome.number] = outcome.values
                except Exception as exc:  # a crashed trial is recorded, not fatal
                    trained.pop(outcome.number, None)
                    record.update(state="FAIL", error=f"crashed: {exc}")
            if record["error"]:
                log.warning("%s: trial %d failed: %s", me, outcome.number, record["error"])
            trials.append(record)
            bar.update(1)
            shown.trial_ended()
    finally:
        bar.close()
    scores = outcome.all_scores()
    for record in trials:
        record["auc"] = scores.get(record["number"]) if record["state"] == "COMPLETE" else None
    check_end(me, outcome, trained=trained, bounds=bounds)  # AnswerRound did; best.toml is written from this only
    best = ({"number": outcome.best, "values": decode_values(outcome.values, what="best values"), "auc": outcome.auc}
            if outcome.best >= 0 else None)
    if best is not None:
        check_trial(me, best["values"], bounds)
    return _write(config, folder, best, trials, overrides,
                  extra={"bounds": bounds, "limits": {k: list(v) for k, v in LIMITS.items()},
                         "trained": {str(n): v for n, v in sorted(trained.items())}})


def _trained_before(folder: Path) -> dict[int, dict[str, Any]]:
    """The trials this partner trained in earlier runs of the search (its own ``tune.json``: number -> values)."""
    import json

    path = folder / "tune.json"
    if not path.is_file():
        return {}
    try:
        saved = json.loads(path.read_text()).get("trained") or {}
        return {int(n): decode_values(json.dumps(v), what=f"{path}: trained") for n, v in saved.items()}
    except (ValueError, AttributeError, VsplitError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc}); move it away (the search then ends only on a trial "
                          "trained in this run)") from None


def _best(study: Any) -> dict[str, Any] | None:
    done = [s for s in study.trials if s.state.name == "COMPLETE"]
    if not done:
        return None
    top = max(done, key=lambda s: (s.value, -s.number))
    return {"number": top.number, "values": dict(top.params), "auc": float(top.value)}


def _show(knob: Any) -> Any:
    return list(knob.choices) if knob.kind == "choice" else [knob.low, knob.high]


def _write(config: PartyConfig, folder: Path, best: dict[str, Any] | None, trials: list[dict[str, Any]],
           overrides: Sequence[str], *, extra: dict[str, Any]) -> TuneOutcome:
    """Write ``tune.json`` and (if a trial finished) ``best.toml``; a search with no finished trial is an error."""
    from vsplit.node.outputs import write_json

    out = TuneOutcome(party=config.party.name, best=best, trials=trials)
    if best is not None:
        note = (f"vsplit tune: trial {best['number']} of run {config.output.run_id}, validation AUC "
                f"{best['auc']:.4f}; train with: vsplit train --config <this file>")
        out.files["best"] = str(write_best(folder / "best.toml", config, best["values"], overrides=overrides,
                                           note=note))
    summary = {"run_id": config.output.run_id, "party": config.party.name, "role": config.party.role, "best": best,
               "trials": trials, **extra, "files": out.files}
    out.files["summary"] = str(write_json(folder / "tune.json", summary))
    if best is None:
        reasons = sorted({t["error"] or t["state"] for t in trials})
        raise VsplitError(f"no trial of the search finished ({len(trials)} tried): {'; '.join(reasons)}; see "
                          f"{folder / 'tune.json'}")
    return out
