"""The privacy audit: train with each defense setting, run every attack on what each party saw, measure utility.

Theory of operation. For every defense setting and seed, :func:`run_once` trains a
:class:`~vsplit.estimator.SplitClassifier` with the defense's hooks plus the attacks' observers and a tap on the
embeddings the label party receives; nothing the attacks attach changes training (they only read). Then:

* label leakage (feature party, :mod:`~vsplit.privacy.attacks.label_leakage`): the norm and direction leak AUCs of
  the gradients it received, per batch over all epochs, against the true labels;
* model completion (feature party, :mod:`~vsplit.privacy.attacks.model_completion`): the test AUC its trained bottom
  plus a head reaches with a few known labels, minus that of the same head on its raw columns;
* feature reconstruction (label party, :mod:`~vsplit.privacy.attacks.reconstruction`): per-column R² of an inverse
  map fitted on a few known rows, on the last epoch's training embeddings and on the embeddings sent for scoring
  test customers;
* utility: the test AUC, and the defense's own statistics and (ε, δ) statement where one applies.

:func:`audit` repeats that over seeds and collects an :class:`~vsplit.privacy.report.AuditReport`.

Example:
    >>> from vsplit.privacy.synthetic import make_imbalanced_views, split_views
    >>> train, test = split_views(make_imbalanced_views(800, seed=0))
    >>> data = AuditData(name="synthetic", train=train, test=test, label_party="bank", label="y", positive_label=1)
    >>> report = audit(data, defenses=["none", "clip_noise"], seeds=1, epochs=2, aux_rows=100, known_labels=[40])
    >>> [row["defense"] for row in report.rows()]
    ['none', 'clip_noise']
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
import torch

from vsplit.errors import ConfigError
from vsplit.estimator import SplitClassifier, TrainingHooks
from vsplit.party import FeatureParty, binarise
from vsplit.privacy.accounting import AccountantMissing
from vsplit.privacy.attacks.label_leakage import DirectionScoring, NormScoring
from vsplit.privacy.attacks.model_completion import model_completion
from vsplit.privacy.attacks.reconstruction import reconstruct_features
from vsplit.privacy.defenses import Defense, make_defense
from vsplit.privacy.hooks import EmbeddingTap, merge_hooks
from vsplit.privacy.report import AuditReport
from vsplit.protocol.training.hooks import StepInfo
from vsplit.psi.alignment import plain_join

#: The attacks an audit can run; :func:`run_once` runs all of them unless told otherwise.
ATTACKS = ("label_leakage", "model_completion", "reconstruction")


class Dataset(Protocol):
    """What an audit needs of a data set: a :class:`vsplit.datasets.Preset` has all of it."""

    name: str
    train: dict[str, pd.DataFrame]
    test: dict[str, pd.DataFrame]
    label_party: str
    label: str
    positive_label: Any


@dataclass(frozen=True)
class AuditData:
    """Per-party train and test tables to audit, when they do not come from a preset."""

    name: str
    train: dict[str, pd.DataFrame]
    test: dict[str, pd.DataFrame]
    label_party: str
    label: str
    positive_label: Any = None


def _dataset(source: str | Dataset | Callable[[int], Dataset], seed: int) -> Dataset:
    if isinstance(source, str):
        from vsplit.datasets import preset

        return preset(source, seed=seed)
    if callable(source) and not hasattr(source, "train"):
        return source(seed)
    return source  # type: ignore[return-value]


def _known_labels(data: Dataset, clf: SplitClassifier, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
    table = views[data.label_party]
    return binarise(table[data.label], clf.label_party_.positive_label, data.label).numpy()


def _test_rows(data: Dataset, clf: SplitClassifier, name: str) -> tuple[tuple[torch.Tensor, torch.Tensor], np.ndarray]:
    """The feature party's test inputs and true labels, for the test customers both parties know."""
    party: FeatureParty = clf.feature_parties_[name]
    ids, inputs = party.prepare(data.test[name])
    label_ids = clf.label_party_.prepare(data.test[data.label_party])[0]
    rows = plain_join({data.label_party: label_ids, name: ids})
    index = torch.from_numpy(np.asarray(rows[name], dtype=np.int64))
    assert inputs is not None
    labels = _known_labels(data, clf, data.test)[rows[data.label_party]]
    return (inputs[0][index], inputs[1][index]), labels


def _column_names(party: FeatureParty) -> tuple[list[str], list[str]]:
    prep = party.preprocessor
    assert prep is not None
    numeric = list(prep.numeric_) + [f"{c}_missing" for c in prep.imputed_]
    return numeric, list(prep.categorical_)


def _sent_at_scoring(hooks: TrainingHooks, name: str, embeddings: torch.Tensor) -> torch.Tensor:
    info = StepInfo(party=name, epoch=0, step=0, rows=None, training=False)
    for hook in hooks.embedding_hooks.get(name, ()):
        embeddings = hook(embeddings, info)
    return embeddings


def run_once(
    data: Dataset,
    defense: str | Defense,
    *,
    seed: int,
    known_labels: Sequence[int] = (40, 200),
    aux_rows: int = 200,
    delta: float = 1e-5,
    estimator: Mapping[str, Any] | None = None,
    attacks: Sequence[str] = ATTACKS,
) -> dict[str, Any]:
    """Train once with ``defense`` and run the attacks; a flat dict of measurements.

    Args:
        data: the tables (a :class:`vsplit.datasets.Preset` or :class:`AuditData`).
        defense: a defense or its config string.
        seed: the estimator's ``random_state`` and the attacks' seed.
        known_labels: label budgets of the model-completion attacker.
        aux_rows: rows whose columns the reconstruction attacker knows.
        delta: δ of any (ε, δ) statement.
        estimator: other :class:`~vsplit.estimator.SplitClassifier` parameters (epochs, batch_size, ...).
        attacks: which of :data:`ATTACKS` to run.
    """
    if unknown := set(attacks) - set(ATTACKS):
        raise ConfigError(f"unknown attacks {sorted(unknown)}; choose from {', '.join(ATTACKS)}")
    defense = make_defense(defense)
    partners = [p for p in data.train if p != data.label_party]
    norms = {p: NormScoring() for p in partners}
    directions = {p: DirectionScoring() for p in partners}
    taps = {p: EmbeddingTap() for p in partners}
    defense_hooks = defense.hooks(feature_parties=partners, seed=seed)
    attack_hooks = TrainingHooks(
        observers={p: [norms[p], directions[p]] for p in partners} if "label_leakage" in attacks else {},
        embedding_hooks={p: [taps[p]] for p in partners},  # last: records what the label party receives
    )
    params = {"label_party": data.label_party, "label": data.label, "positive_label": data.positive_label,
              "candidates": "network"}  # the attacks read the network's embeddings and gradients
    clf = SplitClassifier(**{**params, **dict(estimator or {}), "random_state": seed})
    clf.set_params(hooks=merge_hooks(defense_hooks, attack_hooks))
    started = time.perf_counter()
    clf.fit(data.train)
    fit_seconds = time.perf_counter() - started
    result: dict[str, Any] = {
        "defense": defense.config,
        "seed": seed,
        "test_auc": clf.evaluate(data.test)["auc"],
        "epochs_run": len(clf.history_),
        "fit_seconds": fit_seconds,
    }
    aligned = _known_labels(data, clf, data.train)[clf.rows_[data.label_party]]
    per_party: list[dict[str, float]] = []
    for name in partners:
        party = clf.feature_parties_[name]
        m: dict[str, float] = {}
        if "label_leakage" in attacks:
            norm, direction = norms[name].summary(aligned), directions[name].summary(aligned)
            m |= {"norm_leak_auc": norm.mean, "norm_leak_auc_p95": norm.p95, "leak_auc_chance": norm.chance}
            m |= {"direction_leak_auc": direction.mean, "direction_leak_auc_p95": direction.p95}
        test_inputs, test_labels = _test_rows(data, clf, name)
        if "model_completion" in attacks:
            m |= _completion(party, clf.rows_[name], aligned, test_inputs, test_labels, known_labels, seed=seed)
        if "reconstruction" in attacks:
            m |= _reconstruction(party, clf.rows_[name], taps[name], defense_hooks, test_inputs, aux_rows, seed=seed)
        per_party.append(m)
    for key in per_party[0]:
        result[key] = float(np.nanmean([m.get(key, math.nan) for m in per_party]))
    result |= {f"cost.{k}": v for k, v in defense.stats().items()}
    try:
        guarantee = defense.guarantee(
            n_train=len(aligned), batch_size=clf.batch_size_, epochs=result["epochs_run"], delta=delta
        )
    except AccountantMissing as exc:
        warnings.warn(f"{defense.config}: no epsilon reported: {exc}", stacklevel=2)
        guarantee = None
    if guarantee is not None:
        result |= {"epsilon": guarantee.epsilon, "delta": guarantee.delta, "guarantee_formal": guarantee.formal}
    return result


def _completion(
    party: FeatureParty,
    own_rows: np.ndarray,
    aligned_labels: np.ndarray,
    test_inputs: tuple[torch.Tensor, torch.Tensor],
    test_labels: np.ndarray,
    known_labels: Sequence[int],
    *,
    seed: int,
) -> dict[str, float]:
    """Model completion by the feature party: its trained bottom and a few known labels, scored on test rows."""
    m: dict[str, float] = {}
    train_inputs = party.rows_of(own_rows)
    excess = []
    for n_known in known_labels:
        report = model_completion(
            party.model, train_inputs, aligned_labels, test_inputs, test_labels, n_known=n_known, seed=seed
        )
        m |= {f"model_completion_auc_{n_known}": report.auc, f"raw_features_auc_{n_known}": report.raw_auc}
        m[f"model_completion_excess_auc_{n_known}"] = report.excess
        excess.append(report.excess)
    m["model_completion_excess_auc"] = float(np.mean(excess)) if excess else math.nan
    return m


def _reconstruction(
    party: FeatureParty,
    own_rows: np.ndarray,
    tap: EmbeddingTap,
    defense_hooks: TrainingHooks,
    test_inputs: tuple[torch.Tensor, torch.Tensor],
    aux_rows: int,
    *,
    seed: int,
) -> dict[str, float]:
    """Feature reconstruction by the label party: on the last epoch's training embeddings, then on scoring ones."""
    numeric, categorical = _column_names(party)
    rows, received = tap.last_epoch()
    cat, num = party.rows_of(own_rows[rows])
    rec = reconstruct_features(
        received, cat.numpy(), num.numpy(), numeric_names=numeric, categorical_names=categorical,
        n_aux=aux_rows, seed=seed,
    )
    m = {"reconstruction_r2": rec.mean_r2, "reconstruction_r2_max": rec.max_r2}
    m["reconstruction_accuracy_gain"] = rec.mean_accuracy_gain
    m |= {f"reconstruction_r2[{c}]": v for c, v in rec.numeric.items()}
    assert party.model is not None
    with torch.no_grad():
        party.model.eval()
        scored = _sent_at_scoring(defense_hooks, party.name, party.model(*test_inputs)).numpy()
    if len(scored) > aux_rows + 10:
        rec = reconstruct_features(
            scored, test_inputs[0].numpy(), test_inputs[1].numpy(), numeric_names=numeric,
            categorical_names=categorical, n_aux=aux_rows, seed=seed,
        )
        m |= {"reconstruction_r2_scoring": rec.mean_r2, "reconstruction_r2_scoring_max": rec.max_r2}
    return m


_PROGRESS = ("test_auc", "norm_leak_auc", "direction_leak_auc", "model_completion_excess_auc", "reconstruction_r2")


def audit(
    source: str | Dataset | Callable[[int], Dataset],
    *,
    defenses: Sequence[str | Defense] = ("none",),
    seeds: int | Sequence[int] = 3,
    epochs: int | None = None,
    batch_size: int | None = None,
    known_labels: Sequence[int] = (40, 200),
    aux_rows: int = 200,
    delta: float = 1e-5,
    estimator: Mapping[str, Any] | None = None,
    attacks: Sequence[str] = ATTACKS,
    progress: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audit every defense setting over several seeds: utility and what each attack recovers.

    Args:
        source: a preset name (rebuilt with each seed, so splits vary too), a preset or :class:`AuditData`
            (fixed tables; only training varies), or a function from seed to one of those.
        defenses: defense config strings (see :func:`vsplit.privacy.defenses.make_defense`); include ``"none"``
            to get each setting's utility cost.
        seeds: number of seeds (0, 1, ...) or the seeds themselves.
        epochs, batch_size: shortcuts for those estimator parameters.
        known_labels: label budgets of the model-completion attacker.
        aux_rows: rows whose columns the reconstruction attacker knows.
        delta: δ of any (ε, δ) statement.
        estimator: other :class:`~vsplit.estimator.SplitClassifier` parameters.
        attacks: which of :data:`ATTACKS` to run (default: all).
        progress: called with a line of text after each run.
    """
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list or not defenses:
        raise ConfigError("an audit needs at least one seed and one defense setting (e.g. 'none')")
    configs = [make_defense(d) for d in defenses]  # fail early on a bad config string
    params = dict(estimator or {})
    if epochs is not None:
        params["epochs"] = epochs
    if batch_size is not None:
        params["batch_size"] = batch_size
    runs = []
    name = source if isinstance(source, str) else getattr(source, "name", "custom")
    for seed in seed_list:
        data = _dataset(source, seed)
        for config in configs:
            run = run_once(
                data, make_defense(config.config), seed=seed, known_labels=known_labels, aux_rows=aux_rows,
                delta=delta, estimator=params, attacks=attacks,
            )
            runs.append(run)
            if progress is not None:
                shown = [f"{k} {run[k]:.3f}" for k in _PROGRESS if k in run]
                progress(f"seed {seed} {run['defense']}: " + ", ".join(shown) + f" ({run['fit_seconds']:.1f} s)")
    settings = {
        "source": name, "seeds": seed_list, "known_labels": list(known_labels), "aux_rows": aux_rows,
        "delta": delta, "estimator": params,
    }
    settings["attacks"] = list(attacks)
    return AuditReport(source=str(name), runs=runs, settings=settings, defenses=[c.config for c in configs])
