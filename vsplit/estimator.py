"""Notebook-friendly estimators over the per-party objects, following scikit-learn conventions.

:class:`SplitClassifier` (binary or multiclass labels) and :class:`SplitRegressor` (real-valued labels) are
scikit-learn estimators whose ``X`` is a dict of views, ``{party name: that party's own DataFrame}``, with the labels
a column of the label party's view. All parties run in this one process and talk only through encoded messages over
in-memory channels, exactly the frames a networked run would send. ``mode`` selects split training or one of the two
baselines, computed with the same code: ``"label_party_only"`` (the label party's own columns, no partners) and
``"centralized"`` (the same bottoms and top trained on the pooled columns, without the cut).

scikit-learn conventions: ``__init__`` only stores the parameters; ``get_params``/``set_params`` and
:func:`sklearn.base.clone` work (a clone deep-copies the modules, hooks and callbacks you passed); ``fit(views)``
returns the estimator; what it learns ends in ``_``; ``random_state`` decides every random choice, the initial
weights of the modules you bring included (see ``reset_modules``). Of scikit-learn's estimator checks
(:mod:`sklearn.utils.estimator_checks`), the ones that exercise the parameter protocol pass
(``tests/test_estimator_api.py``); the ones that fit or predict on 2-D arrays do not apply: the input here is one
table per party, joined by a customer-ID column, with the labels inside the label party's table. The test repeats
the checks of the second kind that matter for the protocol (fit changes no parameter and sets only ``_``
attributes) on views.

Example:
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(400)]
    >>> x = rng.normal(size=400)
    >>> bank = pd.DataFrame({"customer_id": ids, "age": rng.normal(size=400), "y": (x > 0.5).astype(int)})
    >>> partner = pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1]})
    >>> views = {"bank": bank, "partner": partner}
    >>> clf = SplitClassifier(label_party="bank", label="y", epochs=3, random_state=0)
    >>> clf.fit(views).predict_proba(views).shape, clf.classes_.tolist(), clf.n_features_in_
    ((400, 2), [0, 1], 2)
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import torch
from sklearn.base import ClassifierMixin, RegressorMixin, clone
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils.validation import check_is_fitted
from torch import nn

from vsplit.app.local import run_sessions
from vsplit.app.session import Schedule, score_session, train_session
from vsplit.errors import ConfigError, DataError
from vsplit.models.averaging import check_ema
from vsplit.models.build import segment_seed
from vsplit.models.determinism import draws_random_numbers
from vsplit.models.own import output_width, reset_parameters
from vsplit.models.recipe import RECIPE
from vsplit.models.rng import OwnStream
from vsplit.models.schedule import check_lr_schedule
from vsplit.models.seeds import derive_seed
from vsplit.party import ComputeParty, FeatureParty, LabelParty, ModelSettings
from vsplit.protocol.training.compression import get_codec
from vsplit.protocol.training.hooks import TrainingHooks
from vsplit.runtime.progress import TqdmProgress
from vsplit.runtime.psi import align_estimator_rows
from vsplit.topology.graph import Topology
from vsplit.views_estimator import ViewsEstimator

MODES = ("split", "label_party_only", "centralized")
KINDS = ("vertical", "vanilla", "u_shaped")
__all__ = ["KINDS", "MODES", "SplitClassifier", "SplitRegressor", "TrainingHooks"]
E = TypeVar("E", bound="_SplitEstimator")


@dataclasses.dataclass(frozen=True)
class Traffic:
    """One party's training traffic in ``pumps_``: its name and its :class:`~vsplit.runtime.stats.CommStats`.

    Only the statistics are kept of the pumps that ran training (their memory channels and machines are gone
    when ``fit`` returns), so a fitted estimator pickles (``pickle``, ``joblib``) and holds no live queue."""

    me: str
    stats: Any


class _SplitEstimator(ViewsEstimator):
    """What :class:`SplitClassifier` and :class:`SplitRegressor` share: the parameters (listed at
    :class:`SplitClassifier`), ``fit``, ``evaluate`` and the fitted attributes.
    """

    #: the task of ``task=None``
    _default_task = "binary"

    def __init__(
        self,
        *,
        label_party: str = "bank",
        label: str = "y",
        id_column: str = "customer_id",
        positive_label: object = None,
        mode: str = "split",
        embedding_width: int = 16,
        bottom_hidden: Sequence[int] = RECIPE["bottom_hidden"],
        top_hidden: Sequence[int] = RECIPE["top_hidden"],
        merge: str = "concat",
        dropout: float = RECIPE["dropout"],
        numeric_embedding: str = RECIPE["numeric_embedding"],
        numeric_width: int = 8,
        numeric_bins: int = 16,
        members: int = 1,
        optimizer: str = RECIPE["optimizer"],
        lr: float = RECIPE["lr"],
        weight_decay: float = RECIPE["weight_decay"],
        lr_schedule: str = RECIPE["lr_schedule"],
        ema: float = RECIPE["ema"],
        epochs: int = RECIPE["epochs"],
        batch_size: int | None = None,
        min_steps: int = RECIPE["min_steps"],
        validation_fraction: float = 0.1,
        patience: int | None = RECIPE["patience"],
        monitor: str = RECIPE["monitor"],
        categorical: Mapping[str, Sequence[str]] | None = None,
        models: Mapping[str, nn.Module] | None = None,
        scaling: str = "quantile",
        missing: str = "error",
        random_state: int = 0,
        alignment: str = "psi",
        progress: bool = False,
        hooks: TrainingHooks | None = None,
        callbacks: Sequence[Any] = (),
        topology: str | Topology = "vertical",
        server: str = "server",
        task: Any = None,
        segments: Mapping[str, nn.Module] | None = None,
        compression: str = "none",
        error_feedback: bool = False,
        pipeline_window: int = 1,
        local_steps: int = 1,
        reset_modules: bool = True,
        fallback: bool = False,
        init_seeds: Mapping[str, int] | None = None,
        candidates: str = "auto",
    ) -> None:
        self.candidates = candidates
        self.init_seeds = init_seeds
        self.fallback = fallback
        self.pipeline_window = pipeline_window
        self.local_steps = local_steps
        self.topology = topology
        self.server = server
        self.task = task
        self.segments = segments
        self.compression = compression
        self.error_feedback = error_feedback
        self.label_party = label_party
        self.label = label
        self.id_column = id_column
        self.positive_label = positive_label
        self.mode = mode
        self.embedding_width = embedding_width
        self.bottom_hidden = bottom_hidden
        self.top_hidden = top_hidden
        self.merge = merge
        self.dropout = dropout
        self.numeric_embedding = numeric_embedding
        self.numeric_width = numeric_width
        self.numeric_bins = numeric_bins
        self.members = members
        self.optimizer = optimizer
        self.lr = lr
        self.weight_decay = weight_decay
        self.lr_schedule = lr_schedule
        self.ema = ema
        self.epochs = epochs
        self.batch_size = batch_size
        self.min_steps = min_steps
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.monitor = monitor
        self.categorical = categorical
        self.models = models
        self.scaling = scaling
        self.missing = missing
        self.random_state = random_state
        self.alignment = alignment
        self.progress = progress
        self.hooks = hooks
        self.callbacks = callbacks
        self.reset_modules = reset_modules

    def clone(self: E, **changes: Any) -> E:
        """A new, unfitted estimator with the same parameters except ``changes`` (:func:`sklearn.base.clone`)."""
        return clone(self).set_params(**changes)

    def save(self, path: str | Path) -> Path:
        """Write this fitted estimator to ``path`` without pickle (arrays and JSON, atomically; read it back with
        :meth:`load`): :mod:`vsplit.estimator_file` says what it keeps. ``pickle`` and ``joblib`` work too."""
        from vsplit.estimator_file import save

        return save(self, path)

    @classmethod
    def load(cls: type[E], path: str | Path) -> E:
        """The fitted estimator :meth:`save` wrote to ``path``; its ``predict_proba`` equals the saved one's."""
        from vsplit.estimator_file import read, restore

        return restore(path, read(path, expect=cls.__name__), cls)

    # -- training --------------------------------------------------------------------------------------------------
    def fit(self: E, views: Mapping[str, pd.DataFrame]) -> E:
        """Align the parties' records and train; ``views`` maps party name to that party's own table.

        Returns:
            the estimator itself, fitted.
        """
        self._check_params(views)
        started = time.perf_counter()
        settings = self._settings()
        categorical = dict(self.categorical or {})
        models = dict(self.models or {})
        self.label_party_ = LabelParty(
            self.label_party, views[self.label_party], label=self.label, id_column=self.id_column,
            positive_label=self.positive_label, settings=settings, categorical=categorical.get(self.label_party),
            model=models.get(self.label_party), seed=self.random_state, task=self._task(),
            init_seed=self._init_seed(self.label_party),
        )
        partners = [name for name in views if name != self.label_party]
        self.feature_parties_ = {
            name: FeatureParty(name, views[name], id_column=self.id_column, label=self.label, settings=settings,
                               categorical=categorical.get(name), model=models.get(name), seed=self.random_state,
                               init_seed=self._init_seed(name))
            for name in partners
        }
        self.topology_ = self._topology(partners)
        extra = set(self.topology_.parties) - set(views)
        self.compute_parties_ = {n: ComputeParty(n, settings=settings, seed=self.random_state,
                                                 init_seed=self._init_seed(n)) for n in extra}
        for seg, module in (self.segments or {}).items():
            self._party(self.topology_.segment(seg).owner).segment_models[seg] = module
        if self.reset_modules:
            self._reset_own_modules()
        if self.mode == "label_party_only" and not self.label_party_.has_features:
            raise DataError(f"{self.label_party}: has no feature columns, so there is no label-party-only model")
        holders = self.topology_.row_holders() if self.mode != "label_party_only" else (self.label_party,)
        self.rows_ = self._align({n: self._party(n).ids for n in holders})
        run = self._run_topology()
        callbacks = [*([TqdmProgress(desc=self.mode)] if self.progress else []), *self.callbacks]
        hooks = self.hooks or TrainingHooks()
        if self.mode != "split":
            hooks = TrainingHooks(label_transform=hooks.label_transform)
        schedule = Schedule(epochs=self.epochs, batch_size=self.batch_size,
                            validation_fraction=self.validation_fraction, patience=self.patience,
                            monitor=self.monitor, seed=self.random_state, window=self.pipeline_window,
                            local_steps=self.local_steps, min_steps=self.min_steps)
        sessions = {}
        for name in run.parties:
            party = self._party(name)
            sessions[name] = train_session(
                party, run, schedule=schedule, hooks=hooks, rows=self.rows_.get(name),
                callbacks=callbacks if name == self.label_party else (),
                placed=self._placed(run, {n: self._inputs_of(n, self.rows_.get(n)) for n in self.rows_})
                if name == self.label_party else None,
            )
        pumps: dict[str, Any] = {}
        outcomes = run_sessions(sessions, session=self._session("fit"), pumps=pumps)
        self.pumps_ = {name: Traffic(name, pump.stats) for name, pump in pumps.get("train", {}).items()}
        self.result_ = outcomes[self.label_party].result
        self.history_ = self.result_.history
        self.best_epoch_ = self.result_.best_epoch
        self.batch_size_ = int(outcomes[self.label_party].extra["machine"].plan.batch_size)
        self.modules_ = self._trained_modules(run)
        self.party_feature_names_in_ = {self.label_party: list(self.label_party_.feature_columns),
                                        **{n: list(p.feature_columns) for n, p in self.feature_parties_.items()}}
        self.n_features_in_ = sum(len(c) for c in self.party_feature_names_in_.values())
        self._fitted_labels(views[self.label_party])
        self.fit_seconds_ = time.perf_counter() - started
        self.n_aligned_ = len(self.rows_[self.label_party])
        self.fallback_ = self._fit_fallback(views[self.label_party])
        from vsplit.candidates import fit_candidates

        fit_candidates(self, views)
        return self

    def _fit_fallback(self, table: pd.DataFrame) -> Any:
        """With ``fallback=True``: the label party's own model on its own columns (:mod:`vsplit.app.fallback`)."""
        if not self.fallback:
            return None
        if self.mode != "split" or _task_name(self._task()) != "binary" or not self.label_party_.has_features:
            raise ConfigError("fallback=True needs mode='split', a binary task and a label party with feature "
                              "columns of its own (it trains the label party's own model); set fallback=False")
        from vsplit.app.fallback import train_bank_only

        alone = LabelParty(self.label_party, table, label=self.label, id_column=self.id_column,
                           positive_label=self.positive_label, settings=self._settings(),
                           categorical=dict(self.categorical or {}).get(self.label_party), seed=self.random_state,
                           init_seed=self._init_seed(self.label_party))
        schedule = Schedule(epochs=self.epochs, batch_size=self.batch_size,
                            validation_fraction=self.validation_fraction, patience=self.patience,
                            monitor=self.monitor, seed=self.random_state, min_steps=self.min_steps)
        return train_bank_only(alone, schedule=schedule, session=self._session("fallback"))

    def _init_seed(self, party: str) -> int:
        """The seed of ``party``'s initial weights and random stream: its ``init_seeds`` entry, or ``random_state``."""
        return int((self.init_seeds or {}).get(party, self.random_state))

    def _task(self) -> Any:
        """The task to train (``task=None``: the estimator's own, binary or regression)."""
        return self._default_task if self.task is None else self.task

    def _fitted_labels(self, table: pd.DataFrame) -> None:
        """Fitted attributes that describe the labels of the label party's ``table`` (the classifier's ``classes_``)."""

    def _topology(self, partners: list[str]) -> Topology:
        """The split ``views`` describe, as a topology; the widths of your own modules found by a dry run."""
        if isinstance(self.topology, Topology):
            missing = sorted(set(self.topology.row_holders()) - {self.label_party, *partners})
            if self.topology.label_owner != self.label_party or missing:
                raise ConfigError(f"topology: labels at {self.topology.label_owner!r}, rows at "
                                  f"{list(self.topology.row_holders())}; the views are {[self.label_party, *partners]}")
            return self.topology
        if self.topology == "vertical":
            bottoms = [self.label_party] * self.label_party_.has_features + partners
            widths = {p: self._width(p, p, self._party(p).inputs) for p in bottoms}
            return Topology.vertical(label_party=self.label_party, feature_parties=partners,
                                     label_has_features=self.label_party_.has_features, width=widths)
        if self.topology == "vanilla":
            if len(partners) != 1:
                raise ConfigError(f"a vanilla split has one client view besides the label party's, got {partners}")
            width = self._width("bottom", partners[0], self._party(partners[0]).inputs)
            return Topology.vanilla(client=partners[0], server=self.label_party, width=width)
        if partners:
            raise ConfigError(f"a U-shaped split has one view (the client's, with the labels); got {partners} too")
        head = self._width("head", self.label_party, self.label_party_.inputs)
        middle = self._width("middle", self.server, (torch.zeros(0, head),), source=False)
        return Topology.u_shaped(client=self.label_party, server=self.server, widths=(head, middle))

    def _own_module(self, segment: str, owner: str, *, source: bool) -> nn.Module | None:
        """The module you brought for ``segment`` (through ``segments``, or ``models`` for a source), if any."""
        module = (self.segments or {}).get(segment)
        return (self.models or {}).get(owner) if module is None and source else module

    def _width(self, segment: str, owner: str, example: Sequence[torch.Tensor] | None, *, source: bool = True) -> int:
        """The output width of ``segment``: ``embedding_width`` for a default module, a dry run's for your own."""
        module = self._own_module(segment, owner, source=source)
        if module is None or example is None:
            return self.embedding_width
        return output_width(module, example, seed=derive_seed(self.random_state, segment, "probe"), name=segment)

    def _reset_own_modules(self) -> None:
        """Re-initialise the modules you brought from ``random_state`` (each segment's default-module seed)."""
        done: set[int] = set()
        for seg in self.topology_.segments:
            module = self._own_module(seg.name, seg.owner, source=seg.is_source)
            if module is not None and id(module) not in done:
                done.add(id(module))
                reset_parameters(module, seed=segment_seed(self.topology_, seg, self._init_seed(seg.owner)))

    def _trained_modules(self, run: Topology) -> dict[str, nn.Module]:
        """Each segment's trained module: held by its owner, or for a baseline by the label party."""
        own = self.label_party_.segment_models
        return {
            s.name: own[s.name] if s.owner == self.label_party and s.name in own
            else self._party(self.topology_.segment(s.name).owner).segment_models[s.name]
            for s in run.segments
        }

    def _run_topology(self) -> Topology:
        """The topology this ``mode`` trains: the split, or a baseline placed at the label party."""
        if self.mode == "split":
            return self.topology_
        if self.mode == "centralized" or self.topology_.kind != "vertical":
            return self.topology_.placed_on(self.label_party)
        own = next((s for s in self.topology_.segments if s.name == self.label_party and s.shapes), None)
        width = own.shapes[0][0] if own is not None else self.embedding_width  # an own bottom keeps its width
        return Topology.vertical(label_party=self.label_party, feature_parties=[], width=width)

    def _party(self, name: str) -> Any:
        if name == self.label_party:
            return self.label_party_
        return self.feature_parties_.get(name) or self.compute_parties_[name]

    def _inputs_of(self, name: str, rows: np.ndarray | None) -> Any:
        party = self._party(name)
        return None if rows is None or getattr(party, "inputs", None) is None else party.rows_of(rows)

    def _placed(self, run: Topology, inputs: Mapping[str, Any]) -> dict[str, tuple[nn.Module, Any]]:
        """Other parties' segments (with their rows, for sources) placed at the label party for a baseline run."""
        placed: dict[str, tuple[nn.Module, Any]] = {}
        if run is self.topology_:
            return placed
        width = self.label_party_.task_width
        for seg in run.segments:
            owner = self.topology_.segment(seg.name).owner
            if owner != self.label_party:
                module = self._party(owner).modules_for(self.topology_, task_width=width)[seg.name]
                if draws_random_numbers(module):  # its dropout masks from its owner's stream, as in the split
                    module = OwnStream(module, self._party(owner).rng)
                placed[seg.name] = (module, inputs.get(owner) if seg.is_source else None)
        return placed

    # -- prediction ------------------------------------------------------------------------------------------------
    def evaluate(self, views: Mapping[str, pd.DataFrame], *, customers: str = "shared") -> dict[str, float]:
        """Test metrics on the rows every party knows: binary ``auc``, ``ks``, ``accuracy``, ``f1``, ``log_loss``;
        multiclass ``accuracy``, ``macro_auc``, ``log_loss``; regression ``rmse``, ``mae``, ``r2``.

        ``customers="shared"`` (default) scores every mode on the same customers, those every party of ``views``
        knows (the ones the split can score), so a ``"label_party_only"`` model compares with the split's figures;
        ``"all"`` scores every row the model can (the label party's own model: all of its rows)."""
        if customers not in ("shared", "all"):
            raise ConfigError(f"customers must be 'shared' or 'all', got {customers!r}")
        y, p, known = self._targets(views)
        if customers == "shared" and self.mode == "label_party_only" and set(views) - {self.label_party}:
            known = known & self._known_to_all(views)
        metrics = self.label_party_.task.metrics(y[known], p[known])
        metrics["n_scored"] = int(known.sum())
        return metrics

    def _known_to_all(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """Which of the label party's rows every party of ``views`` knows (aligned as in training: PSI or a join)."""
        ids = {self.label_party: self.label_party_.prepare(views[self.label_party])[0]}
        ids.update({n: p.prepare(views[n])[0] for n, p in self.feature_parties_.items() if n in views})
        known = np.zeros(len(ids[self.label_party]), dtype=bool)
        known[self._align(ids, store=False)[self.label_party]] = True
        return known

    def _targets(self, views: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Encoded labels of the label party's view, the model's outputs for it, and which rows could be scored."""
        p, known = self._score(views)
        party = self.label_party_
        y = party.task.encode_with(views[self.label_party][self.label], party.label_info).numpy()
        return y, p, known

    def _scored(self, views: Mapping[str, pd.DataFrame], y: None) -> tuple[np.ndarray, np.ndarray]:
        """For ``score``: the encoded labels and the outputs of the rows every party knows."""
        if y is not None:
            raise ConfigError(f"score takes the labels from the label party's column {self.label!r}; leave y=None")
        targets, p, known = self._targets(views)
        return targets[known], p[known]

    def _score(self, views: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray]:
        check_is_fitted(self, "result_")
        prepared = {self.label_party: self.label_party_.prepare(views[self.label_party])}
        for name, party in self.feature_parties_.items():
            if name not in views:
                raise DataError(f"scoring needs party {name!r}'s table as well (the model was trained with it)")
            prepared[name] = party.prepare(views[name])
        self._warn_unseen(views)
        holders = self.topology_.row_holders() if self.mode != "label_party_only" else (self.label_party,)
        rows = self._align({n: prepared[n][0] for n in holders}, store=False)
        run = self._run_topology()

        def pick(name: str) -> Any:
            inputs = prepared[name][1]
            return None if inputs is None else tuple(t[rows[name]] for t in inputs)

        hooks = self.hooks or TrainingHooks()
        if self.mode != "split":
            hooks = TrainingHooks()
        sessions = {
            name: score_session(
                self._party(name), run, prepared.get(name), rows=rows.get(name), hooks=hooks,
                placed=self._placed(run, {n: pick(n) for n in rows}) if name == self.label_party else None,
            )
            for name in run.parties
        }
        outcomes = run_sessions(sessions, session=self._session("score"))
        result = outcomes[self.label_party].result
        label_rows = rows[self.label_party]
        label_ids = prepared[self.label_party][0]
        p = np.full((len(label_ids), *result.shape[1:]), np.nan)
        p[label_rows] = result
        known = np.zeros(len(label_ids), dtype=bool)
        known[label_rows] = True
        if getattr(self, "scorecard_", None) is not None:  # candidates="network+scorecard": the blend of both
            from vsplit.candidates import blend

            with warnings.catch_warnings():  # the network's scoring already warned of customers it did not score
                warnings.simplefilter("ignore", UserWarning)
                card = self.scorecard_.predict_proba(views)[:, 1]
            p = blend(p, card)
        if getattr(self, "calibrator_", None) is not None:  # the label party's calibration (calibrate)
            p = self.calibrator_.apply(p)
        return p, known

    def _warn_unseen(self, views: Mapping[str, pd.DataFrame]) -> None:
        """Warn (:class:`~vsplit.data.unseen.UnseenCategoryWarning`) naming each party's columns where rows to score
        hold a category training never saw: the model scores them as the unknown category."""
        from vsplit.data.unseen import UnseenCategoryWarning, unseen_counts, unseen_in_table, unseen_message

        for name in (self.label_party, *self.feature_parties_):
            counts = unseen_counts(unseen_in_table(self._party(name).preprocessor, views[name]))
            if counts:
                warnings.warn(unseen_message(name, counts, rows=len(views[name])), UnseenCategoryWarning,
                              stacklevel=4)

    def calibrate(self: E, views: Mapping[str, pd.DataFrame], *, method: str = "temperature") -> E:
        """Fit the label party's calibration of the probabilities on ``views``, validation rows the model did not
        train on (``"temperature"`` or ``"isotonic"``, :class:`~vsplit.explain.calibration.Calibrator`); from then on
        :meth:`predict_proba`, :meth:`predict` and :meth:`evaluate` apply it (``calibrator_``; set it to ``None`` to
        remove it). Binary models only."""
        from vsplit.explain.calibration import Calibrator

        self.calibrator_ = None
        y, p, known = self._targets(views)
        if p.ndim != 1 or _task_name(self._task()) != "binary":
            raise ConfigError("calibrate fits a binary model's probabilities; this model is not binary")
        self.calibrator_ = Calibrator.fit(y[known], p[known], method=method)
        return self

    def explain(self, views: Mapping[str, pd.DataFrame], *, steps: int = 32, chunk: int = 256,
                share_top_k: int | Mapping[str, int] = 0, method: str = "auto") -> Any:
        """Attribute the score of each row every party knows to the label party's own columns and to each partner
        as one group (integrated gradients through the cuts, ``steps`` quadrature nodes): a
        :class:`~vsplit.explain.explanation.Explanation`. Each partner computes its own columns' share locally
        (``.partners``, at hand here because every party runs in this process) and tells the label party one
        number per row, plus its ``share_top_k`` most influential column names if it allows (docs/governance.md).
        ``method``: ``"exact"`` integrates each row's path exactly between its breakpoints (piecewise-linear
        networks: ReLU, linear layers, embeddings), ``"quadrature"`` with ``steps`` nodes, ``"auto"`` (default) exact
        where every segment allows it, else the quadrature (``Explanation.note`` says why).
        """
        from vsplit.explain.local import explain_views

        explanation = explain_views(self, views, steps=steps, chunk=chunk, share_top_k=share_top_k, method=method)
        if getattr(self, "scorecard_", None) is not None:  # the blend (candidates): mixed with the scorecard's points
            from vsplit.candidates import explain_blend

            explanation = explain_blend(explanation, self.scorecard_, views)
        return explanation

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _settings(self) -> ModelSettings:
        """The party settings named like this estimator's parameters (the rest at their defaults)."""
        given = {f.name: getattr(self, f.name) for f in dataclasses.fields(ModelSettings) if hasattr(self, f.name)}
        return ModelSettings(**{**given, "bottom_hidden": tuple(self.bottom_hidden),
                                "top_hidden": tuple(self.top_hidden)})

    def _align(self, ids: dict[str, np.ndarray], *, store: bool = True) -> dict[str, np.ndarray]:
        """Each party's rows of the customers all share, in sorted-ID order: by PSI (default) or a plain join."""
        if len(ids) == 1:
            ((name, own),) = ids.items()
            return {name: np.argsort(own, kind="stable")}
        rows, psi_stats = align_estimator_rows(ids, label_party=self.label_party, alignment=self.alignment,
                                               random_state=self.random_state)
        if store and psi_stats is not None:
            self.psi_stats_ = psi_stats
        return rows

    def _session(self, what: str) -> bytes:
        return hashlib.sha256(f"vsplit-{what}-{self.random_state}".encode()).digest()[:16]

    def _check_params(self, views: Mapping[str, pd.DataFrame]) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.label_party not in views:
            raise ConfigError(f"label_party {self.label_party!r} is not among the views {sorted(views)}")
        if not isinstance(self.topology, Topology) and self.topology not in KINDS:
            raise ConfigError(f"topology must be one of {KINDS} or a Topology, got {self.topology!r}")
        if self.topology == "u_shaped":
            if self.server in views:
                raise ConfigError(f"server {self.server!r} is the U-shaped compute party: it has no view; rename it")
        elif self.mode != "label_party_only" and len(views) < 2 and not isinstance(self.topology, Topology):
            raise ConfigError("split training needs at least two parties' views")
        if not 0 <= self.validation_fraction < 1:
            raise ConfigError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        from vsplit.candidates import check_candidates

        check_candidates(self.candidates)
        if self.alignment not in ("psi", "join"):
            raise ConfigError(f"alignment must be 'psi' or 'join', got {self.alignment!r}")
        if self.epochs < 1 or (self.batch_size is not None and self.batch_size < 1):
            raise ConfigError("epochs and batch_size must be at least 1")
        if isinstance(self.min_steps, bool) or not isinstance(self.min_steps, int) or self.min_steps < 0:
            raise ConfigError(f"min_steps must be a whole number >= 0 (0: batch_size as given), got {self.min_steps!r}")
        get_codec(self.compression)  # an unknown name lists the valid ones
        if problem := check_lr_schedule(self.lr_schedule) or check_ema(self.ema):
            raise ConfigError(problem)
        self._check_task()

    def _check_task(self) -> None:
        """Refuse a task this kind of estimator does not learn."""


def _task_name(task: Any) -> str | None:
    return task if isinstance(task, str) else getattr(task, "name", None)


class SplitClassifier(ClassifierMixin, _SplitEstimator):
    """A classifier trained by split learning across parties held as separate DataFrames (vertical by default).

    A scikit-learn classifier whose ``X`` is ``{party name: DataFrame}``, the labels a column of the label party's
    view. ``task=None`` (default) is ``"binary"``; ``task="multiclass"`` learns more classes (a label with a third
    value is an error, not silently another task); for real-valued labels use :class:`SplitRegressor`. The
    parameters and fitted attributes both estimators share are listed here; the classifier also learns
    ``classes_`` (for binary labels ``[negative, positive]``, the order of the columns of :meth:`predict_proba`).

    Of :mod:`sklearn.utils.estimator_checks`, the checks of the parameter protocol pass
    (``check_parameters_default_constructible``, ``check_no_attributes_set_in_init``, ``check_get_params_invariance``,
    ``check_set_params``, ``check_estimator_cloneable``, ``check_estimator_repr``,
    ``check_do_not_raise_errors_in_init_or_set_params``, ``check_estimators_unfitted``, ``check_mixin_order``,
    ``check_valid_tag_types``, ``check_estimator_tags_renamed``); the others fit or predict on generated 2-D arrays
    (with ``y`` apart), which is not this estimator's input: one table per party, joined by an ID column, with the
    labels in the label party's table. ``tests/test_estimator_api.py`` repeats on views what
    ``check_estimators_overwrite_params``, ``check_dont_overwrite_parameters``, ``check_estimators_fit_returns_self``
    and ``check_fit_check_is_fitted`` check.

    The defaults of the architecture, the optimizer and the schedule are the default recipe
    (:data:`vsplit.models.recipe.RECIPE`: numeric embeddings, a bottom of 128 and a top of 64 with dropout 0.1, AdamW
    with weight decay 1e-4, up to 40 epochs kept at the best validation AUC, patience 5); the plain network that was
    the default before is ``SplitClassifier(**vsplit.models.recipe.PLAIN)``.

    Args:
        label_party: name of the party (key of ``views``) that holds the label.
        label: the label column.
        id_column: the customer-ID column every party has.
        positive_label: (binary classification) the positive class (detected for 0/1, False/True, no/yes).
        mode: ``"split"``, ``"label_party_only"`` or ``"centralized"``.
        embedding_width, bottom_hidden, top_hidden, merge, dropout: architecture of the default modules.
            ``embedding_width`` is the output width of the default bottoms and of the default U-shaped middle;
            a module of your own declares its own width (below).
        numeric_embedding, numeric_width, numeric_bins: how the default bottoms embed numeric columns
            (``"piecewise"``: bins fitted on each party's own rows; ``"auto"``, the default, is piecewise here;
            ``"none"``: the scaled values; :mod:`vsplit.models.numeric`).
        members: heads of the default top; more than 1 is an ensemble sharing the one cut exchange.
        optimizer, lr, weight_decay: every party's optimizer.
        lr_schedule: the learning rate over the epochs, each party its own optimizer's: ``"constant"`` or
            ``"cosine"`` (down along half a cosine over ``epochs``; :mod:`vsplit.models.schedule`), e.g.
            ``SplitClassifier(label_party="bank", label="y", lr_schedule="cosine", epochs=20)``.
        ema: the decay per optimizer step of a moving average each party keeps of its own parameters (0: none;
            e.g. ``ema=0.99``): validation scores, and the model keeps, the averaged weights
            (:mod:`vsplit.models.averaging`).
        epochs, batch_size, validation_fraction, patience: training schedule and early stopping. ``batch_size=None``
            (default): 256, or smaller on a small table (``min_steps``); a number is used as given.
        min_steps: with ``batch_size=None``, halve the batch of 256 (not below 32) until an epoch has at least this
            many optimizer steps on the training rows (default 32), and let early stopping wait at least 10 times
            as many steps (more than ``patience`` epochs on a small table), so that it judges a network that has
            trained (:func:`vsplit.app.session.fitted_batch`; docs/models.md, "Small tables"); 0: neither.
            ``batch_size_`` is the batch used.
        monitor: what early stopping watches, and whose best epoch is kept: ``"val_loss"``, the task's metric
            (``"val_auc"`` binary, ``"val_accuracy"`` multiclass, ``"val_rmse"`` regression) or ``"auto"`` (default:
            ``"val_auc"`` for a binary task, ``"val_loss"`` otherwise).

        categorical: categorical columns per party (default: detect by dtype).
        models: bottom models of your own, per party, called as ``model(cat, num)``.
        scaling, missing: preprocessing options (see :class:`~vsplit.data.preprocess.TablePreprocessor`).
        random_state: the one seed every random choice derives from.
        alignment: ``"psi"`` (default: private set intersection, even in one process) or ``"join"`` (a plain join
            of the raw IDs, for data that already sits together).
        progress: show one progress bar for training.
        hooks: defenses, attacks and monitors plugged into training (see :class:`TrainingHooks`).
        callbacks: objects with ``on_step(epoch, step, steps, loss)`` and/or ``on_epoch(record)``, told about
            training progress at the label party (e.g. :class:`~vsplit.runtime.progress.EpochClock`).
        topology: ``"vertical"`` (default: every view a party, bottoms joined by the label party's top),
            ``"vanilla"`` (one client view with the features, the label party holds the labels and the layers
            after the cut), ``"u_shaped"`` (one view with features and labels; a compute party ``server`` runs
            the middle), or a :class:`~vsplit.topology.Topology` of your own.
        server: the compute party's name in a U-shaped split.
        task: ``None`` (the estimator's own: ``"binary"`` for a classifier, ``"regression"`` for a regressor),
            ``"multiclass"``, or a task object of your own (:mod:`vsplit.models.tasks`).
        segments: modules of your own by segment name (e.g. ``{"head": ImageHead(), "middle": ...}``); source
            segments are called ``module(cat, num)``, see :mod:`vsplit.models.segments`.
        compression: how every party encodes the tensors it sends across a cut: ``"none"`` (default: float32,
            exact), ``"float16"``, ``"bfloat16"``, ``"int8"`` or ``"topk_<fraction>"`` (gradients only; see
            :mod:`vsplit.protocol.training.compression` and ``docs/wan.md``).
        error_feedback: carry what a lossy compression lost on a training tensor into the next one.
        pipeline_window, local_steps: let the parties that only send activations run ahead of the gradients, for
            slow links (1 and 1: exact; see docs/wan.md and :mod:`vsplit.protocol.training.pipeline`).
        reset_modules: re-initialise the modules you pass in ``models`` and ``segments`` from ``random_state`` at
            the start of ``fit`` (default), so the same ``random_state`` gives the same model however the global
            torch generator stood when you built them: ``reset_parameters()`` of every submodule that has one, under
            a seed derived from ``random_state`` and the segment's name (the seed its default module would get); a
            parameter of a submodule without ``reset_parameters`` keeps its value. ``False`` keeps your weights
            (pre-trained or seeded by you).
        fallback: (binary, vertical) also train the label party's own model on its own columns; customers a partner
            does not know are then scored by it in :meth:`predict_proba` instead of NaN, and :meth:`scored_by`
            says which model scored each row (``"split"`` or ``"bank_only"``).
        init_seeds: the seed of each named party's initial weights, dropout stream and the modules it owns (default:
            ``random_state`` for every party): the init seeds the parties of a run between organizations hold
            (:mod:`vsplit.models.secret`), to build the same model here, e.g. the centralized run of the oracle.
        candidates: ``"network+scorecard"`` also trains the split scorecard and scores with the mean of both
            models' log-odds (binary, vertical, ``mode="split"``, the ``he`` extra); ``"network"`` trains the network
            alone; ``"auto"`` (default) blends on a small table (at most 5,000 aligned training rows) where the
            scorecard can join, else the network alone. ``candidates_`` says what was trained, ``scorecard_`` holds
            the scorecard (:mod:`vsplit.candidates`; docs/models.md, "Small tables").

    Modules of your own. ``fit`` trains the very modules you pass (as PyTorch would); a clone trains copies. With a
    built-in topology (``"vertical"``, ``"vanilla"``, ``"u_shaped"``) the output width of each of your source
    segments (and of a U-shaped ``middle``) is found by one dry forward pass on two zero rows shaped like its input
    (no gradients, eval mode, every training flag restored, a private random stream derived from
    ``random_state``), so the widths need not be repeated by hand; a :class:`~vsplit.topology.Topology` of your
    own is used with the shapes it declares.

    Attributes (after ``fit``):
        history_, best_epoch_: the per-epoch records and the epoch whose weights were kept.
        modules_: the trained module of each segment, by segment name.
        topology_: the split trained; ``label_party_``, ``feature_parties_``, ``compute_parties_``: the parties.
        n_features_in_, party_feature_names_in_: the number of feature columns over all views, and each party's.
        rows_: each party's aligned training rows; ``n_aligned_``: their number; ``psi_stats_``: the alignment's
            sizes, seconds and bytes (PSI only); ``pumps_``: each party's training traffic; ``fit_seconds_``.

    Example:
        >>> import numpy as np, pandas as pd
        >>> from sklearn.base import clone
        >>> rng = np.random.default_rng(0)
        >>> ids = [str(i) for i in range(300)]
        >>> x = rng.normal(size=300)
        >>> views = {"bank": pd.DataFrame({"customer_id": ids, "y": np.where(x > 0, "yes", "no")}),
        ...          "partner": pd.DataFrame({"customer_id": ids, "x": x})}
        >>> clf = SplitClassifier(label_party="bank", topology="vanilla", epochs=2, random_state=0).fit(views)
        >>> clf.classes_.tolist(), clf.predict(views).shape, 0 <= clf.score(views) <= 1
        (['no', 'yes'], (300,), True)
        >>> again = clone(clf).fit(views)
        >>> bool(np.array_equal(again.predict_proba(views), clf.predict_proba(views)))
        True
    """

    def _check_task(self) -> None:
        if _task_name(self.task) == "regression":
            raise ConfigError("SplitClassifier learns classes; for task='regression' use SplitRegressor, which takes "
                              "the same parameters: vsplit.SplitRegressor(label_party=..., label=..., ...)")

    def _fitted_labels(self, table: pd.DataFrame) -> None:
        info = self.label_party_.label_info
        if "classes" in info:
            self.classes_ = np.array(info["classes"])
        else:  # binary: [negative, positive]
            positive = info.get("positive_label", 1)
            others = [v for v in pd.unique(table[self.label]) if v != positive]
            self.classes_ = np.array([others[0] if others else None, positive])

    def predict_proba(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """Class probabilities for the label party's rows, in its order: ``(n, len(classes_))``.

        Rows that some partner does not know cannot be scored by the split: with ``fallback=True`` the label
        party's own model scores them (:meth:`scored_by` says which rows); otherwise their probabilities are NaN
        and a warning says how many (they are reported, not silently dropped). Rows holding a category training never
        saw are scored as the unknown category, with an :class:`~vsplit.data.unseen.UnseenCategoryWarning` naming the
        party and column (:func:`vsplit.data.unseen.unseen_in_table` says which rows).
        """
        p, known = self._score(views)
        if not known.all() and getattr(self, "fallback_", None) is not None:
            from vsplit.app.fallback import score_bank_only

            p = p.copy()
            p[~known] = score_bank_only(self.fallback_, views[self.label_party], rows=np.flatnonzero(~known))
            known = np.ones(len(p), dtype=bool)
        if not known.all():
            warnings.warn(
                f"{int((~known).sum())} of {len(known)} customers of {self.label_party!r} are unknown to a partner "
                "and were not scored (NaN)",
                stacklevel=2,
            )
        return p if p.ndim == 2 else np.column_stack([1 - p, p])

    def scored_by(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """Which model scores each of the label party's rows in :meth:`predict_proba`: ``"split"``, ``"bank_only"``
        (a partner does not know the customer, ``fallback=True``) or ``""`` (not scored)."""
        _, known = self._score(views)
        other = "bank_only" if getattr(self, "fallback_", None) is not None else ""
        return np.where(known, "split", other)

    def predict(self, views: Mapping[str, pd.DataFrame], *, threshold: float = 0.5) -> np.ndarray:
        """The predicted class (a value of ``classes_``) of each of the label party's rows, in its order.

        Binary: the positive class where its probability is at least ``threshold``. Rows that some partner does not
        know cannot be scored: they get ``None`` (the array is then of dtype object).
        """
        codes, known = self._codes(views, threshold=threshold)
        if known.all():
            return self.classes_[codes]
        out = np.full(len(codes), None, dtype=object)
        out[known] = self.classes_[codes[known]]
        return out

    def tune(self, views: Mapping[str, pd.DataFrame], *, n_trials: int = 20,
             bounds: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
             space: Mapping[str, Any] | None = None, storage: str | None = None, validation_fraction: float = 0.2,
             progress: bool = False) -> Any:
        """Search this estimator's recipe on ``views`` (training rows only) and return a
        :class:`~vsplit.tune.study.TuneResult` (``pip install 'vsplit[tune]'``; docs/tuning.md).

        Each trial trains a clone on a stratified ``1 - validation_fraction`` of the label party's rows and is scored
        by its AUC on the rest (the network alone: ``candidates`` adds the same scorecard whatever the trial);
        ``bounds`` maps a partner to its bounds (knob -> (low, high)), and a trial outside
        them is refused and recorded, not fatal. ``storage`` is a journal file: a second call with it resumes the
        study. Fit the winner with ``clf.clone(**estimator_params(result.best_values)).fit(views)``.

        Example:
            >>> bounds = {"partner": {"numeric_bins": (8, 24)}}
            >>> result = clf.tune(train_views, n_trials=20, bounds=bounds)  # doctest: +SKIP
        """
        from vsplit.tune.rows import validation_views
        from vsplit.tune.space import check_trial, estimator_params
        from vsplit.tune.study import run_study

        fit, valid = validation_views(views, label_party=self.label_party, label=self.label,
                                      fraction=validation_fraction, seed=self.random_state)

        def score(values: dict[str, Any]) -> float:
            for party, limits in (bounds or {}).items():
                check_trial(party, values, limits)
            # the network alone: a blend's scorecard (candidates) does not depend on the trial's settings
            trial = self.clone(**{**estimator_params(values), "candidates": "network"})
            return trial.fit(fit).evaluate(valid)["auc"]

        return run_study(score, n_trials=n_trials, seed=self.random_state, space=space, storage=storage,
                         progress=progress)

    def score(self, views: Mapping[str, pd.DataFrame], y: None = None) -> float:
        """Accuracy on the label party's rows that every party knows (the rows that can be scored); the labels
        are the ``label`` column of the label party's view (``y`` stays ``None``: it is there for scikit-learn's
        signature)."""
        targets, p = self._scored(views, y)
        return float(accuracy_score(targets.astype(np.int64), self._decide(p, 0.5)))

    def _codes(self, views: Mapping[str, pd.DataFrame], *, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        p, known = self._score(views)
        codes = np.zeros(len(p), dtype=np.int64)
        codes[known] = self._decide(p[known], threshold)
        return codes, known

    @staticmethod
    def _decide(p: np.ndarray, threshold: float) -> np.ndarray:
        """Class indices from outputs: ``(n,)`` positive-class probabilities, or ``(n, C)`` probabilities."""
        return (p >= threshold).astype(np.int64) if p.ndim == 1 else p.argmax(axis=1)


class SplitRegressor(RegressorMixin, _SplitEstimator):
    """A regressor trained by split learning across parties held as separate DataFrames (vertical by default).

    The same parameters, training and fitted attributes as :class:`SplitClassifier` (``positive_label`` unused),
    for a real-valued label column: ``task=None`` (default) is ``"regression"`` (mean squared error; early stopping
    on minus the validation RMSE); a task object of your own may replace it. The same scikit-learn checks apply
    and pass, for the same reasons.

    Example:
        >>> import numpy as np, pandas as pd
        >>> rng = np.random.default_rng(0)
        >>> ids = [str(i) for i in range(300)]
        >>> x = rng.normal(size=300)
        >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": rng.normal(size=300), "amount": 3 * x}),
        ...          "partner": pd.DataFrame({"customer_id": ids, "x": x})}
        >>> reg = SplitRegressor(label_party="bank", label="amount", epochs=5, lr=1e-2, random_state=0).fit(views)
        >>> reg.predict(views).shape, reg.score(views) > 0.5  # R² on the rows every party knows
        ((300,), True)
    """

    _default_task = "regression"

    def _check_task(self) -> None:
        if _task_name(self.task) in ("binary", "multiclass"):
            raise ConfigError(f"SplitRegressor predicts values; for task={self.task!r} use SplitClassifier, which "
                              "takes the same parameters")

    def predict(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """The predicted value of each of the label party's rows, in its order; NaN where some partner does not know
        the customer (such rows cannot be scored)."""
        p, _ = self._score(views)
        return p

    def score(self, views: Mapping[str, pd.DataFrame], y: None = None) -> float:
        """R² on the label party's rows that every party knows (the rows that can be scored); the labels are the
        ``label`` column of the label party's view (``y`` stays ``None``: it is there for scikit-learn's
        signature)."""
        targets, p = self._scored(views, y)
        return float(r2_score(targets, p))
