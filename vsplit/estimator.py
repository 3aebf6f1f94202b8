"""A notebook-friendly estimator over the per-party objects, following scikit-learn conventions.

All parties run in this one process and talk only through encoded messages over in-memory channels, exactly the
frames a networked run would send. ``mode`` selects split training or one of the two baselines, computed with the
same code: ``"label_party_only"`` (the label party's own columns, no partners) and ``"centralized"`` (the same
bottoms and top trained on the pooled columns, without the cut).

Example:
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(400)]
    >>> x = rng.normal(size=400)
    >>> bank = pd.DataFrame({"customer_id": ids, "age": rng.normal(size=400), "y": (x > 0.5).astype(int)})
    >>> partner = pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1]})
    >>> clf = SplitClassifier(label_party="bank", label="y", epochs=3, random_state=0)
    >>> clf.fit({"bank": bank, "partner": partner}).predict_proba({"bank": bank, "partner": partner}).shape
    (400, 2)
"""

from __future__ import annotations

import hashlib
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from torch import nn

from vsplit.app.local import run_sessions
from vsplit.app.session import Schedule, score_session, train_session
from vsplit.errors import ConfigError, DataError
from vsplit.party import ComputeParty, FeatureParty, LabelParty, ModelSettings
from vsplit.protocol.training.compression import get_codec
from vsplit.protocol.training.hooks import TrainingHooks
from vsplit.psi import PsiConfig
from vsplit.psi.alignment import canonical_rows, plain_join
from vsplit.runtime.progress import TqdmProgress
from vsplit.runtime.psi import align_in_process
from vsplit.topology.graph import Topology

MODES = ("split", "label_party_only", "centralized")
KINDS = ("vertical", "vanilla", "u_shaped")
__all__ = ["KINDS", "MODES", "SplitClassifier", "TrainingHooks"]


class SplitClassifier:
    """A model trained by split learning across parties held as separate DataFrames (vertical by default).

    Args:
        label_party: name of the party (key of ``views``) that holds the label.
        label: the label column.
        id_column: the customer-ID column every party has.
        positive_label: the positive class (detected for 0/1, False/True, no/yes).
        mode: ``"split"``, ``"label_party_only"`` or ``"centralized"``.
        embedding_width, bottom_hidden, top_hidden, merge, dropout: architecture.
        optimizer, lr, weight_decay: every party's optimizer.
        epochs, batch_size, validation_fraction, patience: training schedule and early stopping on validation AUC.
        categorical: categorical columns per party (default: detect by dtype).
        models: bottom models of your own, per party, called as ``model(cat, num)``.
        scaling, missing: preprocessing options (see :class:`~vsplit.data.preprocess.TablePreprocessor`).
        random_state: the one seed every random choice derives from.
        alignment: ``"psi"`` (default: private set intersection, even in one process) or ``"join"`` (a plain join
            of the raw IDs, for data that already sits together).
        progress: show a progress bar per epoch.
        hooks: defenses, attacks and monitors plugged into training (see :class:`TrainingHooks`).
        callbacks: objects with ``on_step(epoch, step, steps, loss)`` and/or ``on_epoch(record)``, told about
            training progress at the label party (e.g. :class:`~vsplit.runtime.progress.EpochClock`).
        topology: ``"vertical"`` (default: every view a party, bottoms joined by the label party's top),
            ``"vanilla"`` (one client view with the features, the label party holds the labels and the layers
            after the cut), ``"u_shaped"`` (one view with features and labels; a compute party ``server`` runs
            the middle), or a :class:`~vsplit.topology.Topology` of your own.
        server: the compute party's name in a U-shaped split.
        task: ``"binary"`` (default), ``"multiclass"``, ``"regression"`` or a task object
            (:mod:`vsplit.models.tasks`).
        segments: modules of your own by segment name (e.g. ``{"head": ImageHead(), "middle": ...}``); source
            segments are called ``module(cat, num)``, see :mod:`vsplit.models.segments`.
        compression: how every party encodes the tensors it sends across a cut: ``"none"`` (default: float32,
            exact), ``"float16"``, ``"bfloat16"``, ``"int8"`` or ``"topk_<fraction>"`` (gradients only; see
            :mod:`vsplit.protocol.training.compression` and ``docs/wan.md``).
        error_feedback: carry what a lossy compression lost on a training tensor into the next one.
        pipeline_window, local_steps: let the parties that only send activations run ahead of the gradients, for
            slow links (1 and 1: exact; see docs/wan.md and :mod:`vsplit.protocol.training.pipeline`).
    """

    def __init__(
        self,
        *,
        label_party: str = "bank",
        label: str = "y",
        id_column: str = "customer_id",
        positive_label: object = None,
        mode: str = "split",
        embedding_width: int = 16,
        bottom_hidden: Sequence[int] = (64,),
        top_hidden: Sequence[int] = (32,),
        merge: str = "concat",
        dropout: float = 0.0,
        optimizer: str = "adam",
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        epochs: int = 20,
        batch_size: int = 256,
        validation_fraction: float = 0.1,
        patience: int | None = 3,
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
        task: Any = "binary",
        segments: Mapping[str, nn.Module] | None = None,
        compression: str = "none",
        error_feedback: bool = False,
        pipeline_window: int = 1,
        local_steps: int = 1,
    ) -> None:
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
        self.optimizer = optimizer
        self.lr = lr
        self.weight_decay = weight_decay
        self.epochs = epochs
        self.batch_size = batch_size
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.categorical = categorical
        self.models = models
        self.scaling = scaling
        self.missing = missing
        self.random_state = random_state
        self.alignment = alignment
        self.progress = progress
        self.hooks = hooks
        self.callbacks = callbacks

    # -- scikit-learn conventions ----------------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__init__.__code__.co_varnames[1:] if hasattr(self, name)}

    def set_params(self, **params: Any) -> SplitClassifier:
        for name, value in params.items():
            if name not in self.get_params():
                raise ConfigError(f"unknown parameter {name!r}; valid: {sorted(self.get_params())}")
            setattr(self, name, value)
        return self

    def clone(self, **changes: Any) -> SplitClassifier:
        """A new, unfitted estimator with the same parameters except ``changes``."""
        return SplitClassifier(**{**self.get_params(), **changes})

    # -- training --------------------------------------------------------------------------------------------------
    def fit(self, views: Mapping[str, pd.DataFrame]) -> SplitClassifier:
        """Align the parties' records and train; ``views`` maps party name to that party's own table."""
        self._check_params(views)
        started = time.perf_counter()
        settings = self._settings()
        categorical = dict(self.categorical or {})
        models = dict(self.models or {})
        self.label_party_ = LabelParty(
            self.label_party, views[self.label_party], label=self.label, id_column=self.id_column,
            positive_label=self.positive_label, settings=settings, categorical=categorical.get(self.label_party),
            model=models.get(self.label_party), seed=self.random_state, task=self.task,
        )
        partners = [name for name in views if name != self.label_party]
        self.feature_parties_ = {
            name: FeatureParty(name, views[name], id_column=self.id_column, label=self.label, settings=settings,
                               categorical=categorical.get(name), model=models.get(name), seed=self.random_state)
            for name in partners
        }
        self.topology_ = self._topology(partners)
        extra = set(self.topology_.parties) - set(views)
        self.compute_parties_ = {n: ComputeParty(n, settings=settings, seed=self.random_state) for n in extra}
        for seg, module in (self.segments or {}).items():
            self._party(self.topology_.segment(seg).owner).segment_models[seg] = module
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
                            seed=self.random_state, window=self.pipeline_window, local_steps=self.local_steps)
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
        self.pumps_ = pumps.get("train", {})
        self.result_ = outcomes[self.label_party].result
        self.history_ = self.result_.history
        self.best_epoch_ = self.result_.best_epoch
        self.classes_ = np.array(self.label_party_.label_info.get("classes", [0, 1]))
        self.fit_seconds_ = time.perf_counter() - started
        self.n_aligned_ = len(self.rows_[self.label_party])
        return self

    def _topology(self, partners: list[str]) -> Topology:
        """The split ``views`` describe, as a topology."""
        if isinstance(self.topology, Topology):
            missing = sorted(set(self.topology.row_holders()) - {self.label_party, *partners})
            if self.topology.label_owner != self.label_party or missing:
                raise ConfigError(f"topology: labels at {self.topology.label_owner!r}, rows at "
                                  f"{list(self.topology.row_holders())}; the views are {[self.label_party, *partners]}")
            return self.topology
        w = self.embedding_width
        if self.topology == "vertical":
            return Topology.vertical(label_party=self.label_party, feature_parties=partners,
                                     label_has_features=self.label_party_.has_features, width=w)
        if self.topology == "vanilla":
            if len(partners) != 1:
                raise ConfigError(f"a vanilla split has one client view besides the label party's, got {partners}")
            return Topology.vanilla(client=partners[0], server=self.label_party, width=w)
        if partners:
            raise ConfigError(f"a U-shaped split has one view (the client's, with the labels); got {partners} too")
        return Topology.u_shaped(client=self.label_party, server=self.server, widths=(w, w))

    def _run_topology(self) -> Topology:
        """The topology this ``mode`` trains: the split, or a baseline placed at the label party."""
        if self.mode == "split":
            return self.topology_
        if self.mode == "centralized" or self.topology_.kind != "vertical":
            return self.topology_.placed_on(self.label_party)
        return Topology.vertical(label_party=self.label_party, feature_parties=[], width=self.embedding_width)

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
                placed[seg.name] = (module, inputs.get(owner) if seg.is_source else None)
        return placed

    # -- prediction ------------------------------------------------------------------------------------------------
    def predict_proba(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """Class probabilities for the label party's rows, in its order: ``(n, 2)`` binary, ``(n, C)`` multiclass.

        Rows that some partner does not know cannot be scored: their probabilities are NaN and a warning says how
        many (they are reported, not silently dropped).
        """
        p, known = self._score(views)
        if self.label_party_.task.name == "regression":
            raise ConfigError("predict_proba is for classifiers; a regression model predicts values: use predict()")
        if not known.all():
            warnings.warn(
                f"{int((~known).sum())} of {len(known)} customers of {self.label_party!r} are unknown to a partner "
                "and were not scored (NaN)",
                stacklevel=2,
            )
        return p if p.ndim == 2 else np.column_stack([1 - p, p])

    def predict(self, views: Mapping[str, pd.DataFrame], *, threshold: float = 0.5) -> np.ndarray:
        """Binary: 0/1 (-1 for rows that could not be scored); multiclass: the class (None if not scored);
        regression: the predicted value (NaN if not scored)."""
        p, known = self._score(views)
        task = self.label_party_.task.name
        if task == "regression":
            return p
        if task == "multiclass":
            classes = np.asarray(self.label_party_.label_info["classes"], dtype=object)
            out = np.full(len(p), None, dtype=object)
            out[known] = classes[np.argmax(p[known], axis=1)]
            return out
        out = (p >= threshold).astype(int)
        out[~known] = -1
        return out

    def evaluate(self, views: Mapping[str, pd.DataFrame]) -> dict[str, float]:
        """Test metrics on the rows every party knows: binary ``auc``, ``ks``, ``accuracy``, ``f1``, ``log_loss``;
        multiclass ``accuracy``, ``macro_auc``, ``log_loss``; regression ``rmse``, ``mae``, ``r2``."""
        p, known = self._score(views)
        party = self.label_party_
        y = party.task.encode_with(views[self.label_party][self.label], party.label_info).numpy()
        metrics = party.task.metrics(y[known], p[known])
        metrics["n_scored"] = int(known.sum())
        return metrics

    def _score(self, views: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray]:
        if not hasattr(self, "result_"):
            raise ConfigError("this SplitClassifier is not fitted yet; call fit() first")
        prepared = {self.label_party: self.label_party_.prepare(views[self.label_party])}
        for name, party in self.feature_parties_.items():
            if name not in views:
                raise DataError(f"scoring needs party {name!r}'s table as well (the model was trained with it)")
            prepared[name] = party.prepare(views[name])
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
        return p, known

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _settings(self) -> ModelSettings:
        return ModelSettings(
            embedding_width=self.embedding_width,
            bottom_hidden=tuple(self.bottom_hidden),
            top_hidden=tuple(self.top_hidden),
            merge=self.merge,
            dropout=self.dropout,
            optimizer=self.optimizer,
            lr=self.lr,
            weight_decay=self.weight_decay,
            scaling=self.scaling,
            missing=self.missing,
            compression=self.compression,
            error_feedback=self.error_feedback,
        )

    def _align(self, ids: dict[str, np.ndarray], *, store: bool = True) -> dict[str, np.ndarray]:
        """Each party's rows of the customers all share, in sorted-ID order: by PSI (default) or a plain join."""
        if len(ids) == 1:
            ((name, own),) = ids.items()
            return {name: np.argsort(own, kind="stable")}
        if self.alignment == "join":
            return plain_join(ids)
        out = align_in_process({n: list(v) for n, v in ids.items()}, label_party=self.label_party,
                               config=PsiConfig(context=f"vsplit-estimator-{self.random_state}"))
        if store:
            stats = out[self.label_party].stats
            self.psi_stats_ = {"sizes": {self.label_party: stats.size, **stats.peer_sizes},
                               "intersection": stats.intersection, "seconds": stats.seconds,
                               "bytes_sent": {n: a.stats.bytes_sent for n, a in out.items()}}
        return {n: canonical_rows(a) for n, a in out.items()}

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
        if self.alignment not in ("psi", "join"):
            raise ConfigError(f"alignment must be 'psi' or 'join', got {self.alignment!r}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError("epochs and batch_size must be at least 1")
        get_codec(self.compression)  # an unknown name lists the valid ones
