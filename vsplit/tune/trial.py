"""One trial of a search between organizations: the party's own run of split training on the training rows, scored
on the label party's validation rows.

Theory of operation. A trial is a training run of the party's usual program (:class:`~vsplit.node.aligned.
AlignedNode`: PSI, split training, then joint scoring of a second table) on a config derived from the party's own
(:func:`trial_config`): the trial's values set (:func:`~vsplit.tune.settings.with_values`), its own run folder under
``<run folder>/tune/trials/`` and run id (so its session and PSI salt are its own). The label party trains on the
inner-train part of its training rows and scores the validation part (:func:`split_rows`: a seeded, stratified cut
written once under ``tune/rows/``); a partner trains and scores with all its training rows, as in a real run. The
``data.test_path`` of the config is never read. A trial saves no model, trains no fallback and writes no report: its
result is the validation metrics, at the label party.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vsplit.atomic import save_with
from vsplit.config import PartyConfig, resolve
from vsplit.config.names import run_folder
from vsplit.data.sources import read_table
from vsplit.node.aligned import AlignedNode, evaluate_labels
from vsplit.party import LabelParty
from vsplit.tune.rows import validation_views
from vsplit.tune.settings import with_values


def tune_folder(config: PartyConfig) -> Path:
    """``<output.dir>/<run_id>/<party>/tune``: where a party's search writes."""
    return run_folder(resolve(config, config.output.dir), config.output.run_id, config.party.name) / "tune"


def trial_run_id(config: PartyConfig, number: int) -> str:
    """The run id of trial ``number``, the same at every party (its session id and PSI salt derive from it)."""
    return f"{config.output.run_id[:48]}.trial-{number:04d}"


def split_rows(config: PartyConfig) -> tuple[Path, Path]:
    """The label party's training rows cut into (inner-train, validation) Parquet files under ``tune/rows``, seeded
    by ``tune.seed``, stratified by the label; written once, read by every trial."""
    d, t = config.data, config.tune
    folder = tune_folder(config) / "rows"
    paths = folder / "fit.parquet", folder / "valid.parquet"
    if all(p.is_file() for p in paths):
        return paths
    assert d.label is not None
    table = read_table(resolve(config, d.path), id_column=d.id_column, features=d.features, label=d.label)
    fit, valid = validation_views({"own": table}, label_party="own", label=d.label, fraction=t.validation_fraction,
                                  seed=t.seed)
    for path, part in zip(paths, (fit["own"], valid["own"]), strict=True):
        save_with(path, lambda handle, p=part: p.to_parquet(handle, index=False), within=folder.parent.parent)
    return paths


def trial_config(config: PartyConfig, values: Mapping[str, Any], *, number: int) -> PartyConfig:
    """``config`` for trial ``number``: its values set, its own folder and run id, the label party's rows split."""
    tuned = with_values(config, values)
    d = tuned.data
    if config.party.role == "label":
        fit, valid = split_rows(config)
        data = dataclasses.replace(d, path=str(fit), test_path=str(valid), stream=False)
    else:  # a partner scores its own training rows: the label party's validation rows are among them
        data = dataclasses.replace(d, test_path=d.path)
    output = dataclasses.replace(tuned.output, dir=str(tune_folder(config) / "trials"),
                                 run_id=trial_run_id(config, number), baselines=False)
    psi = dataclasses.replace(tuned.psi, resumable=False)
    return dataclasses.replace(tuned, data=data, output=output, psi=psi)


class TrialNode(AlignedNode):
    """A party's program in one trial: :class:`AlignedNode`'s session, without the model file, the fallback model
    or the report; :meth:`finish` returns the label party's validation metrics (``{}`` at a partner)."""

    def save_model(self) -> Path:
        return self.folder / "model.npz"  # a trial keeps no model: the best config is trained again, on all rows

    def train_fallback(self) -> Any:
        return None

    def finish(self, outcome: Any, comm: dict[str, Any], seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> dict[str, Any]:
        training, scored = outcome
        shutil.rmtree(self.folder, ignore_errors=True)  # its checkpoints: nothing of a trial is kept on disk
        if not isinstance(self.party, LabelParty) or scored is None:
            return {}
        metrics = evaluate_labels(self.party, scored.table, scored.rows, scored.proba)
        return {**metrics, "n_valid": len(scored.rows), "best_epoch": training.result.best_epoch,
                "epochs_run": len(training.result.history), "seconds": {k: round(v, 3) for k, v in seconds.items()}}
