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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from vsplit.errors import ConfigError, DataError
from vsplit.metrics import binary_metrics
from vsplit.models.seeds import derive_seed
from vsplit.party import FeatureParty, LabelParty, ModelSettings
from vsplit.protocol.training import Plan
from vsplit.protocol.training.hooks import EmbeddingHook, GradientHook, LocalLoss, Observer
from vsplit.psi import PsiConfig, align_in_process
from vsplit.runtime.alignment import canonical_rows, plain_join
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.runtime.progress import TqdmProgress

MODES = ("split", "label_party_only", "centralized")


@dataclass(frozen=True)
class TrainingHooks:
    """What plugs into training without the training machines importing it.

    Attributes:
        gradient_hooks: at the label party, on each gradient before it is sent (defenses).
        embedding_hooks: per feature party, on its embeddings before they are sent (defenses); also at validation
            and scoring, with ``info.training`` False.
        observers: per feature party, callbacks that see each gradient it received (attacks, monitors).
        local_losses: per feature party, an extra loss on its own embeddings (e.g. NoPeek).
        label_transform: at the label party, maps the aligned training labels (e.g. randomized response).
    """

    gradient_hooks: Sequence[GradientHook] = ()
    embedding_hooks: Mapping[str, Sequence[EmbeddingHook]] = field(default_factory=dict)
    observers: Mapping[str, Sequence[Observer]] = field(default_factory=dict)
    local_losses: Mapping[str, LocalLoss] = field(default_factory=dict)
    label_transform: Callable[[torch.Tensor], torch.Tensor] | None = None


class SplitClassifier:
    """Binary classifier trained by vertical split learning across parties held as separate DataFrames.

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
    ) -> None:
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
            self.label_party,
            views[self.label_party],
            label=self.label,
            id_column=self.id_column,
            positive_label=self.positive_label,
            settings=settings,
            categorical=categorical.get(self.label_party),
            model=models.get(self.label_party),
            seed=self.random_state,
        )
        partners = [name for name in views if name != self.label_party]
        self.feature_parties_ = {
            name: FeatureParty(
                name,
                views[name],
                id_column=self.id_column,
                label=self.label,
                settings=settings,
                categorical=categorical.get(name),
                model=models.get(name),
                seed=self.random_state,
            )
            for name in partners
        }
        if self.mode == "label_party_only" and not self.label_party_.has_features:
            raise DataError(f"{self.label_party}: has no feature columns, so there is no label-party-only model")
        self.rows_ = self._align(self._ids())
        label_rows = self.rows_[self.label_party]
        roles = self.label_party_.make_roles(
            label_rows, validation_fraction=self.validation_fraction, seed=self.random_state
        )
        plan = Plan(
            epochs=self.epochs,
            batch_size=self.batch_size,
            seed=derive_seed(self.random_state, "schedule") % 2**31,
            roles=roles,
        )
        callbacks = [*([TqdmProgress(desc=self.mode)] if self.progress else []), *self.callbacks]
        hooks = self.hooks or TrainingHooks()
        machines: dict[str, Any] = {}
        remote = {}
        extra_local = {}
        if self.mode == "split":
            for name, party in self.feature_parties_.items():
                machines[name] = party.trainer(
                    self.rows_[name],
                    label_party=self.label_party,
                    embedding_hooks=hooks.embedding_hooks.get(name, ()),
                    observers=hooks.observers.get(name, ()),
                    local_loss=hooks.local_losses.get(name),
                )
                remote[name] = self.embedding_width
        elif self.mode == "centralized":
            extra_local = {n: (p.model, p.rows_of(self.rows_[n])) for n, p in self.feature_parties_.items()}
        machines[self.label_party] = self.label_party_.trainer(
            label_rows,
            remote=remote,
            plan=plan,
            extra_local=extra_local,
            patience=self.patience,
            callbacks=callbacks,
            gradient_hooks=hooks.gradient_hooks if self.mode == "split" else (),
            label_transform=hooks.label_transform,
        )
        self.pumps_ = connect(list(machines), session=self._session("fit"))
        results = run_machines(self.pumps_, machines)
        self.result_ = results[self.label_party]
        self.history_ = self.result_.history
        self.best_epoch_ = self.result_.best_epoch
        self.classes_ = np.array([0, 1])
        self.fit_seconds_ = time.perf_counter() - started
        self.n_aligned_ = len(label_rows)
        return self

    # -- prediction ------------------------------------------------------------------------------------------------
    def predict_proba(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """``(n, 2)`` probabilities for the label party's rows, in its order.

        Rows that some partner does not know cannot be scored: their probabilities are NaN and a warning says how
        many (they are reported, not silently dropped).
        """
        p, known = self._score(views)
        if not known.all():
            warnings.warn(
                f"{int((~known).sum())} of {len(known)} customers of {self.label_party!r} are unknown to a partner "
                "and were not scored (NaN)",
                stacklevel=2,
            )
        return np.column_stack([1 - p, p])

    def predict(self, views: Mapping[str, pd.DataFrame], *, threshold: float = 0.5) -> np.ndarray:
        """0/1 predictions (-1 for rows that could not be scored)."""
        p, known = self._score(views)
        out = (p >= threshold).astype(int)
        out[~known] = -1
        return out

    def evaluate(self, views: Mapping[str, pd.DataFrame]) -> dict[str, float]:
        """Test metrics (``auc``, ``ks``, ``accuracy``, ``f1``, ``log_loss``) on the rows every party knows."""
        p, known = self._score(views)
        table = views[self.label_party]
        from vsplit.party import binarise

        y = binarise(table[self.label], self.label_party_.positive_label, self.label).numpy()
        metrics = binary_metrics(y[known], p[known])
        metrics["n_scored"] = int(known.sum())
        return metrics

    def _score(self, views: Mapping[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray]:
        if not hasattr(self, "result_"):
            raise ConfigError("this SplitClassifier is not fitted yet; call fit() first")
        label_ids, label_inputs = self.label_party_.prepare(views[self.label_party])
        prepared = {self.label_party: (label_ids, label_inputs)}
        for name, party in self.feature_parties_.items():
            if name not in views:
                raise DataError(f"scoring needs party {name!r}'s table as well (the model was trained with it)")
            prepared[name] = party.prepare(views[name])
        used = [self.label_party] if self.mode == "label_party_only" else list(prepared)
        rows = self._align({n: prepared[n][0] for n in used}, store=False)
        label_rows = rows[self.label_party]

        def pick(inputs, r):
            return None if inputs is None else (inputs[0][r], inputs[1][r])

        machines: dict[str, Any] = {}
        remote, extra_local = {}, {}
        if self.mode == "split":
            for name, party in self.feature_parties_.items():
                machines[name] = party.scorer(
                    pick(prepared[name][1], rows[name]),
                    label_party=self.label_party,
                    embedding_hooks=(self.hooks or TrainingHooks()).embedding_hooks.get(name, ()),
                )
                remote[name] = self.embedding_width
        elif self.mode == "centralized":
            extra_local = {n: (p.model, pick(prepared[n][1], rows[n])) for n, p in self.feature_parties_.items()}
        machines[self.label_party] = self.label_party_.scorer(
            pick(label_inputs, label_rows), remote=remote, n_rows=len(label_rows), extra_local=extra_local
        )
        result = run_machines(connect(list(machines), session=self._session("score")), machines)[self.label_party]
        p = np.full(len(label_ids), np.nan)
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
        )

    def _ids(self) -> dict[str, np.ndarray]:
        parties = {self.label_party: self.label_party_.ids}
        if self.mode != "label_party_only":
            parties.update({n: p.ids for n, p in self.feature_parties_.items()})
        return parties

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
        if self.mode != "label_party_only" and len(views) < 2:
            raise ConfigError("split training needs at least two parties' views")
        if not 0 <= self.validation_fraction < 1:
            raise ConfigError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        if self.alignment not in ("psi", "join"):
            raise ConfigError(f"alignment must be 'psi' or 'join', got {self.alignment!r}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError("epochs and batch_size must be at least 1")
