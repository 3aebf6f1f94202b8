"""Feature reconstruction by the label party: invert a feature party's embeddings with a few known rows.

Theory of operation. The label party receives each feature party's embedding of every training row, each epoch.
Suppose it also knows that party's raw columns for ``n_aux`` of those rows (customers it shares data with anyway,
or a leaked sample): it can fit an inverse map from embedding to columns on them and apply it to every other row
(the learning-based model inversion of He et al., ACSAC 2019, in the auxiliary-data setting of Luo et al.'s feature
inference attacks, ICDE 2021). The map is chosen per column by cross-validation on the known rows among a few
scikit-learn models (the prior, a linear model, small MLPs).

The columns are compared in the party's preprocessed form (numeric columns quantile-mapped to a standard normal,
categories as codes), so every numeric column weighs the same: the report gives each numeric column's R² and each
categorical column's accuracy, next to the prior baseline an attacker without embeddings would get (the auxiliary
rows' mean, for which R² ≈ 0, and their majority category).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> num = rng.normal(size=(600, 2))
    >>> cat = rng.integers(1, 3, size=(600, 1))
    >>> embeddings = np.column_stack([np.tanh(num[:, 0]), num[:, 0] + cat[:, 0], rng.normal(size=600)])
    >>> report = reconstruct_features(embeddings, cat, num, numeric_names=["a", "b"], categorical_names=["c"])
    >>> report.numeric["a"] > 0.9, abs(report.numeric["b"]) < 0.2, report.categorical["c"] > 0.9
    (True, True, True)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_predict
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from vsplit.errors import ConfigError


@dataclass(frozen=True)
class ReconstructionReport:
    """Per-column reconstruction quality on the rows the attacker did not know.

    Attributes:
        numeric: numeric column -> R² of the reconstruction.
        numeric_baseline: numeric column -> R² of predicting the auxiliary rows' mean (about 0).
        categorical: categorical column -> accuracy of the reconstruction.
        categorical_baseline: categorical column -> accuracy of predicting the auxiliary rows' majority.
        n_aux: rows the attacker knew; n_target: rows it reconstructed.
    """

    numeric: dict[str, float] = field(default_factory=dict)
    numeric_baseline: dict[str, float] = field(default_factory=dict)
    categorical: dict[str, float] = field(default_factory=dict)
    categorical_baseline: dict[str, float] = field(default_factory=dict)
    n_aux: int = 0
    n_target: int = 0

    @property
    def mean_r2(self) -> float:
        """Mean R² over the numeric columns (NaN if there are none)."""
        return float(np.mean(list(self.numeric.values()))) if self.numeric else math.nan

    @property
    def max_r2(self) -> float:
        """The best-reconstructed numeric column's R²."""
        return float(max(self.numeric.values())) if self.numeric else math.nan

    @property
    def mean_accuracy_gain(self) -> float:
        """Mean over categorical columns of accuracy minus the majority baseline's."""
        if not self.categorical:
            return math.nan
        return float(np.mean([self.categorical[c] - self.categorical_baseline[c] for c in self.categorical]))


_MLP = {"solver": "lbfgs", "max_iter": 300}  # L-BFGS: the fast, recommended solver for a few hundred rows


def _numeric_candidates(seed: int, hidden: int) -> dict[str, object]:
    return {
        "mean": DummyRegressor(),
        "ridge": RidgeCV(alphas=np.logspace(-3, 3, 13)),
        "mlp": MLPRegressor(hidden_layer_sizes=(hidden,), alpha=1e-2, **_MLP, random_state=seed),
        "mlp_strong": MLPRegressor(hidden_layer_sizes=(hidden,), alpha=1.0, **_MLP, random_state=seed),
    }


def _categorical_candidates(seed: int, hidden: int) -> dict[str, object]:
    return {
        "majority": DummyClassifier(strategy="most_frequent"),
        "logistic": LogisticRegression(C=1.0, max_iter=1000),
        "mlp": MLPClassifier(hidden_layer_sizes=(hidden,), alpha=1e-2, **_MLP, random_state=seed),
    }


def reconstruct_features(
    embeddings: np.ndarray,
    cat: np.ndarray,
    num: np.ndarray,
    *,
    numeric_names: Sequence[str],
    categorical_names: Sequence[str],
    n_aux: int = 200,
    seed: int = 0,
    hidden: int = 64,
    folds: int = 3,
) -> ReconstructionReport:
    """Fit an inverse map on ``n_aux`` random rows, reconstruct the others, and score it per column.

    For each column the attacker picks, by ``folds``-fold cross-validation on its auxiliary rows, the best of a few
    inverse models (the prior, ridge regression or logistic regression, and MLPs), as a careful attacker would: so a
    defense that leaves nothing to invert shows R² ≈ 0, not the large negative R² of an over-fitted map.

    Args:
        embeddings: ``(n, width)`` embeddings the label party received, one per row.
        cat: ``(n, n_categorical)`` true category codes of the same rows.
        num: ``(n, n_numeric)`` true preprocessed numeric columns of the same rows.
        numeric_names, categorical_names: column names, in the order of ``num`` and ``cat``.
        n_aux: number of rows whose columns the attacker knows.
        seed: seed of the choice of auxiliary rows and of the inverse models.
        hidden: width of the inverse MLPs' hidden layer.
        folds: cross-validation folds for the choice of inverse model.
    """
    embeddings, cat, num = np.asarray(embeddings, np.float64), np.asarray(cat), np.asarray(num, np.float64)
    n = len(embeddings)
    if not 2 * folds <= n_aux < n - 1:
        raise ConfigError(f"n_aux must be between {2 * folds} and {n - 2} (the rows available), got {n_aux}")
    if len(numeric_names) != num.shape[1] or len(categorical_names) != cat.shape[1]:
        raise ConfigError("numeric_names and categorical_names must name every column of num and cat")
    order = np.random.default_rng(seed).permutation(n)
    aux, target = order[:n_aux], order[n_aux:]
    scaler = StandardScaler().fit(embeddings[aux])
    x_aux, x_target = scaler.transform(embeddings[aux]), scaler.transform(embeddings[target])
    report = ReconstructionReport(n_aux=n_aux, n_target=len(target))
    splitter = KFold(n_splits=folds, shuffle=True, random_state=seed)
    # a few hundred rows: one BLAS thread is fastest, and many threads stall on a busy machine
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        if num.shape[1]:
            y_aux = num[aux]
            scores = {}
            for key, model in _numeric_candidates(seed, hidden).items():
                guess = cross_val_predict(model, x_aux, y_aux, cv=splitter).reshape(len(aux), -1)
                scores[key] = [r2_score(y_aux[:, j], guess[:, j]) for j in range(num.shape[1])]
            fitted: dict[str, np.ndarray] = {}
            for j, name in enumerate(numeric_names):
                best = max(scores, key=lambda k, j=j: scores[k][j])
                if best not in fitted:
                    model = _numeric_candidates(seed, hidden)[best]
                    fitted[best] = model.fit(x_aux, y_aux).predict(x_target).reshape(len(target), -1)
                truth = num[target, j]
                report.numeric[name] = float(r2_score(truth, fitted[best][:, j]))
                report.numeric_baseline[name] = float(r2_score(truth, np.full_like(truth, y_aux[:, j].mean())))
        for j, name in enumerate(categorical_names):
            truth, known = cat[target, j], cat[aux, j]
            values, counts = np.unique(known, return_counts=True)
            majority = values[np.argmax(counts)]
            guess = np.full_like(truth, majority)
            if len(values) > 1 and counts.min() >= 2:
                cv = StratifiedKFold(n_splits=min(folds, int(counts.min())), shuffle=True, random_state=seed)
                candidates = _categorical_candidates(seed, hidden)
                accuracy = {
                    k: np.mean(cross_val_predict(m, x_aux, known, cv=cv) == known) for k, m in candidates.items()
                }
                best = max(accuracy, key=lambda k: accuracy[k])
                guess = _categorical_candidates(seed, hidden)[best].fit(x_aux, known).predict(x_target)
            report.categorical[name] = float(np.mean(guess == truth))
            report.categorical_baseline[name] = float(np.mean(truth == majority))
    return report
