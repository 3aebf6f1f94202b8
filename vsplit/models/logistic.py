"""A regularized logistic regression on one party's prepared inputs: the bank's own scorecard.

Theory of operation. A party's preprocessing turns its table into category codes (0: a value not seen in training)
and scaled numbers (:class:`~vsplit.data.preprocess.TablePreprocessor`). The design matrix is one indicator column per
code of every categorical column, then the numbers. :meth:`LogisticModel.fit` fits an L2-regularized logistic
regression (scikit-learn's, ``C`` per :data:`DEFAULT_C`) on the training rows; the model keeps plain arrays only
(coefficients, intercept, the cardinalities and the training rows' mean design row, its ``reference``), so it saves
and loads without pickle (:meth:`state`, :meth:`from_state`). The reasons of a score are each column's coefficient
times its distance from the reference, in log-odds (:meth:`contributions`; a categorical column's is its code's
coefficient minus the reference's mean of that column's coefficients): they sum to the log-odds minus the
reference's.

Example:
    >>> import numpy as np, torch
    >>> rng = np.random.default_rng(0)
    >>> num = torch.tensor(rng.normal(size=(200, 2)), dtype=torch.float32)
    >>> cat = torch.tensor(rng.integers(1, 3, size=(200, 1)))
    >>> y = (num[:, 0].numpy() + 0.5 * (cat[:, 0].numpy() == 2) > 0.3).astype(int)
    >>> lr = LogisticModel.fit((cat, num), y, cardinalities=[3])
    >>> lr.proba((cat, num)).shape, bool(lr.coef[-2] > 0)
    ((200,), True)
    >>> c = lr.contributions((cat[:3], num[:3]))
    >>> bool(np.allclose(c.sum(axis=1), lr.log_odds((cat[:3], num[:3])) - lr.reference_log_odds))
    True
    >>> again = LogisticModel.from_state(lr.state())
    >>> bool(np.array_equal(again.proba((cat, num)), lr.proba((cat, num))))
    True
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the inverse regularization strength (scikit-learn's ``C``; features are quantile- or standard-scaled)
DEFAULT_C = 1.0
#: the name reports and ``fallback.npz`` give this model
NAME = "logistic_regression"


def _arrays(inputs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    cat, num = inputs
    cat = np.asarray(cat.numpy() if hasattr(cat, "numpy") else cat, dtype=np.int64)
    num = np.asarray(num.numpy() if hasattr(num, "numpy") else num, dtype=np.float64)
    return cat.reshape(len(cat), -1), num.reshape(len(num), -1)


@dataclass
class LogisticModel:
    """A fitted logistic regression over ``(category codes, numbers)`` inputs; plain arrays only."""

    cardinalities: np.ndarray  # codes per categorical column (code 0: unseen)
    coef: np.ndarray  # one per indicator column, then one per number
    intercept: float
    reference: np.ndarray  # the training rows' mean design row

    @classmethod
    def fit(cls, inputs: Sequence[Any], y: np.ndarray, *, cardinalities: Sequence[int], c: float = DEFAULT_C,
            sample_rows: np.ndarray | None = None) -> LogisticModel:
        """Fit on ``inputs`` (all rows, or ``sample_rows`` of them) and their 0/1 labels ``y`` (same rows)."""
        from sklearn.linear_model import LogisticRegression

        cards = np.asarray(list(cardinalities), dtype=np.int64)
        design = _design(*_arrays(inputs), cards)
        if sample_rows is not None:
            design = design[np.asarray(sample_rows, dtype=np.int64)]
        y = np.asarray(y).astype(np.int64)
        fitted = LogisticRegression(C=c, max_iter=2000).fit(design, y)
        return cls(cardinalities=cards, coef=fitted.coef_[0].astype(np.float64),
                   intercept=float(fitted.intercept_[0]), reference=design.mean(axis=0))

    def log_odds(self, inputs: Sequence[Any]) -> np.ndarray:
        """The log-odds of each row of ``inputs``."""
        return _design(*_arrays(inputs), self.cardinalities) @ self.coef + self.intercept

    def proba(self, inputs: Sequence[Any]) -> np.ndarray:
        """The positive class's probability of each row of ``inputs``."""
        return 1.0 / (1.0 + np.exp(-self.log_odds(inputs)))

    @property
    def reference_log_odds(self) -> float:
        """The log-odds of the reference (mean) design row."""
        return float(self.reference @ self.coef + self.intercept)

    def contributions(self, inputs: Sequence[Any]) -> np.ndarray:
        """Each input column's share of each row's log-odds minus the reference's: ``(rows, categorical +
        numeric columns)``, coefficient times (value minus reference), summed over a category's indicators."""
        terms = (_design(*_arrays(inputs), self.cardinalities) - self.reference) * self.coef
        edges = np.cumsum([0, *self.cardinalities.tolist()])
        columns = [terms[:, a:b].sum(axis=1) for a, b in itertools.pairwise(edges.tolist())]
        columns += [terms[:, j] for j in range(int(edges[-1]), terms.shape[1])]
        return np.column_stack(columns) if columns else np.zeros((len(terms), 0))

    def state(self) -> dict[str, Any]:
        """Plain arrays and numbers (no pickle): :meth:`from_state` rebuilds the model."""
        return {"cardinalities": self.cardinalities.copy(), "coef": self.coef.copy(),
                "intercept": np.asarray([self.intercept]), "reference": self.reference.copy()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> LogisticModel:
        """The model :meth:`state` describes, its shapes checked."""
        cards = np.asarray(state["cardinalities"], dtype=np.int64).reshape(-1)
        coef = np.asarray(state["coef"], dtype=np.float64).reshape(-1)
        reference = np.asarray(state["reference"], dtype=np.float64).reshape(-1)
        if (cards < 1).any() or len(coef) < cards.sum() or len(reference) != len(coef):
            raise ValueError("a logistic model's arrays do not fit together (cardinalities, coef, reference)")
        return cls(cardinalities=cards, coef=coef, intercept=float(np.asarray(state["intercept"]).reshape(-1)[0]),
                   reference=reference)


def _design(cat: np.ndarray, num: np.ndarray, cardinalities: np.ndarray) -> np.ndarray:
    """One indicator column per code of every categorical column (codes beyond a column's count are unseen, 0),
    then the numbers."""
    if cat.shape[1] != len(cardinalities):
        raise ValueError(f"{cat.shape[1]} categorical columns given, the model has {len(cardinalities)}")
    blocks = []
    for j, k in enumerate(cardinalities.tolist()):
        codes = np.where((cat[:, j] >= 0) & (cat[:, j] < k), cat[:, j], 0)
        block = np.zeros((len(cat), k))
        block[np.arange(len(cat)), codes] = 1.0
        blocks.append(block)
    return np.hstack([*blocks, num]) if blocks else num
