"""Averaging ``networks`` independently seeded split networks: a deep ensemble of :class:`SplitClassifier`.

Each network is a whole :class:`~vsplit.estimator.SplitClassifier` fit with its own seed (``random_state + 1000 * i``
for the ``i``-th network): its own bottoms at every party, its own top, its own cut. With the default
``numeric_embedding="auto"`` the networks take piecewise-linear and periodic numeric embeddings in turn
(:func:`vsplit.models.recipe.network_numeric`); a kind named explicitly is every network's. The output is the mean
of the networks' probabilities. Nothing new crosses the cut, but everything crosses it ``networks`` times:
``networks`` times the cut traffic (each network's embeddings and gradients) and about ``networks`` times the
training time.
Each network equals the same network trained in one place (tests/test_oracle.py), so the average does too.
Unlike the ``members`` option (several heads over one cut exchange, no extra bytes), each network here has its own
bottoms, which is what makes its errors independent.

``refit=True`` trains each network twice: first as usual, early stopping choosing the epoch count on the network's
validation rows (``validation_fraction`` of the shared rows), then again from the same seed on *all* the shared rows
for that many epochs (no validation rows, the last epoch kept). Every row then trains every network; the second fit
costs about as much as the first (up to ``patience`` epochs fewer). Both fits are ordinary :class:`SplitClassifier`
fits, so the split still equals the same bag trained in one place (tests/test_bagging.py).

Example:
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(300)]
    >>> x = rng.normal(size=300)
    >>> bank = pd.DataFrame({"customer_id": ids, "age": rng.normal(size=300), "y": (x > 0.5).astype(int)})
    >>> views = {"bank": bank, "partner": pd.DataFrame({"customer_id": ids, "x": x})}
    >>> bag = SplitBag(networks=2, label_party="bank", label="y", epochs=2, random_state=0).fit(views)
    >>> bag.predict_proba(views).shape, [clf.numeric_embedding for clf in bag.estimators_]
    ((300, 2), ['piecewise', 'periodic'])
    >>> refit = SplitBag(networks=1, refit=True, label_party="bank", label="y", epochs=3, random_state=0).fit(views)
    >>> refit.estimators_[0].validation_fraction, refit.epochs_[0] == len(refit.estimators_[0].history_)
    (0.0, True)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.errors import ConfigError
from vsplit.estimator import SplitClassifier
from vsplit.models.recipe import network_numeric
from vsplit.models.seeds import SEED_STRIDE, network_seed

__all__ = ["SEED_STRIDE", "SplitBag", "fit_network"]


class SplitBag:
    """``networks`` :class:`SplitClassifier` fits with seeds ``random_state + 1000 * i``; probabilities averaged.

    Args:
        networks: how many networks, at least 1 (1: exactly one :class:`SplitClassifier`).
        refit: after each network's fit, fit it again on all the shared rows for its best epoch count (above).
        **params: :class:`SplitClassifier` parameters, shared by every network (``random_state`` is the first's).
    """

    def __init__(self, *, networks: int = 3, refit: bool = False, **params: Any) -> None:
        if not isinstance(networks, int) or networks < 1:
            raise ConfigError(f"SplitBag networks must be an integer of at least 1, got {networks!r}")
        if not isinstance(refit, bool):
            raise ConfigError(f"SplitBag refit must be True or False, got {refit!r}")
        if refit and params.get("validation_fraction", 0.1) == 0:
            raise ConfigError("SplitBag refit=True chooses the epoch count on validation rows: set "
                              "validation_fraction above 0, or refit=False")
        self.networks = networks
        self.refit = refit
        self.params = params

    def fit(self, views: Mapping[str, pd.DataFrame]) -> SplitBag:
        """Fit every network on ``views`` (as :meth:`SplitClassifier.fit`); returns the bag."""
        from vsplit.data.parquet_table import ParquetTable

        seed = int(self.params.get("random_state", 0))
        base = SplitClassifier(**{"candidates": "network", **self.params, "random_state": seed})  # networks
        streamed = any(isinstance(table, ParquetTable) for table in views.values())
        init = self.params.get("init_seeds") or {}  # each party's init seed, strided per network as the run seed
        fitted = [fit_network(base.clone(random_state=network_seed(seed, i),
                                         init_seeds={p: network_seed(s, i) for p, s in init.items()} or None,
                                         numeric_embedding=network_numeric(base.numeric_embedding, i,
                                                                           streamed=streamed)), views, refit=self.refit)
                  for i in range(self.networks)]
        self.estimators_ = [clf for clf, _ in fitted]
        #: each network's epoch count chosen by early stopping (the first fit's best epoch, counted from 1)
        self.epochs_ = [epochs for _, epochs in fitted]
        self.classes_ = self.estimators_[0].classes_
        return self

    def save(self, path: str | Path) -> Path:
        """Write the fitted bag to ``path`` without pickle, every network in one file (:mod:`vsplit.estimator_file`);
        :meth:`load` reads it back."""
        from vsplit.estimator_file import save

        return save(self, path)

    @classmethod
    def load(cls, path: str | Path) -> SplitBag:
        """The fitted bag :meth:`save` wrote to ``path``."""
        from vsplit.errors import UnreadableCheckpoint
        from vsplit.estimator_file import read, restore

        state = read(path, expect=cls.__name__)
        try:
            bag = cls(networks=int(state["networks"]), refit=bool(state["refit"]), **state["params"])
            bag.epochs_ = [int(e) for e in state["epochs"]]
            members = list(state["members"])
        except (KeyError, TypeError, ValueError) as exc:
            raise UnreadableCheckpoint(f"{path} does not hold a bag ({type(exc).__name__}: {exc}); save it again") \
                from None
        bag.estimators_ = [restore(path, member, SplitClassifier) for member in members]
        bag.classes_ = bag.estimators_[0].classes_
        return bag

    @property
    def history_(self) -> list:
        """The first network's per-epoch history (each network stops early on its own)."""
        return self.estimators_[0].history_

    def predict_proba(self, views: Mapping[str, pd.DataFrame]) -> np.ndarray:
        """The mean of the networks' :meth:`SplitClassifier.predict_proba` (a warning about unscored customers is
        given once, by the first network: every network scores the same customers)."""
        first = self.estimators_[0].predict_proba(views)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            rest = [clf.predict_proba(views) for clf in self.estimators_[1:]]
        return np.mean([first, *rest], axis=0)

    def evaluate(self, views: Mapping[str, pd.DataFrame], *, customers: str = "shared") -> dict[str, float]:
        """As :meth:`SplitClassifier.evaluate` (``customers`` too), on the averaged outputs."""
        first = self.estimators_[0]
        if customers not in ("shared", "all"):
            raise ConfigError(f"customers must be 'shared' or 'all', got {customers!r}")
        y, p, known = first._targets(views)
        if customers == "shared" and first.mode == "label_party_only" and set(views) - {first.label_party}:
            known = known & first._known_to_all(views)  # the same customers as the split's figures
        for clf in self.estimators_[1:]:
            p = p + clf._targets(views)[1]
        p = p / self.networks
        metrics = first.label_party_.task.metrics(y[known], p[known])
        metrics["n_scored"] = int(known.sum())
        return metrics


def fit_network(clf: SplitClassifier, views: Mapping[str, pd.DataFrame], *, refit: bool = False
                ) -> tuple[SplitClassifier, int]:
    """Fit ``clf`` on ``views``; with ``refit``, fit a clone again on every shared row (no validation rows) for the
    epoch count the first fit kept. Returns the fitted estimator and that epoch count (counted from 1)."""
    first = clf.fit(views)
    epochs = len(first.history_) if first.best_epoch_ is None else first.best_epoch_ + 1
    if not refit:
        return first, epochs
    return first.clone(epochs=epochs, validation_fraction=0.0, patience=None).fit(views), epochs
