"""A scorecard's score as per-party contributions: each attribute's points on the log-odds scale.

Theory of operation: a row's log-odds is the intercept minus its points over the scale's factor
(:class:`~vsplit.scorecard.points.Scaling`: ``z = (offset - score) / factor`` and the intercept's points are
``offset - factor * intercept``), so each attribute contributes ``-points / factor`` against a baseline of the
intercept (every WOE at 0, the training rows' odds), and the contributions add up to the score exactly. The label
party knows its own attributes' points and each partner's total (the one number a partner answers when scoring), so
its explanation has its own columns and each partner as a group, as a network's does; an ensemble with
``ensemble.second = "scorecard"`` weighs it with the networks' (:func:`vsplit.ensemble.weighted_explanation`).

Example:
    >>> import numpy as np
    >>> from vsplit.scorecard.points import PointsTable, Scaling
    >>> from vsplit.scorecard.predict import ScoredPoints
    >>> s = Scaling()
    >>> own = PointsTable.of(names=["age"], labels=[["young", "old"]], woe=[np.array([0.5, -0.5])],
    ...                      coef=np.array([1.0]), scaling=s)
    >>> codes = np.array([[0], [1]])
    >>> mine = own.score(codes)
    >>> points = ScoredPoints(score=s.base_points(-1.0) + mine + np.array([3.0, -3.0]),
    ...                       by_party={"bank": mine, "shop": np.array([3.0, -3.0])})
    >>> e = points_explanation(points, label_party="bank", ids=["a", "b"], own=own, own_codes=codes, scaling=s,
    ...                        intercept=-1.0)
    >>> [round(float(v), 6) for v in e.completeness_error()], round(float(e.features["age"]["a"]), 6)
    ([0.0, 0.0], 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd


def points_explanation(points: Any, *, label_party: str, ids: Sequence[str], own: Any, own_codes: np.ndarray,
                       scaling: Any, intercept: float) -> Any:
    """The :class:`~vsplit.explain.explanation.Explanation` of scored rows (``points``: the label party's
    :class:`~vsplit.scorecard.predict.ScoredPoints`, rows in ``ids``' order): ``own``, the label party's points
    table, and ``own_codes``, its bins of those rows, give its columns' contributions; each partner's points its
    group's."""
    from vsplit.explain.explanation import Explanation

    ids = [str(i) for i in ids]
    factor = scaling.factor
    features = pd.DataFrame(-own._per_attribute(own_codes) / factor, columns=list(own.names), index=ids)
    groups = pd.DataFrame({p: -np.asarray(v, dtype=np.float64) / factor for p, v in points.by_party.items()
                           if p != label_party}, index=ids)
    return Explanation(label_party=label_party, ids=ids, score=np.asarray(scaling.log_odds(points.score)),
                       baseline_score=np.full(len(ids), float(intercept)), features=features, groups=groups,
                       method="scorecard")


__all__ = ["points_explanation"]
