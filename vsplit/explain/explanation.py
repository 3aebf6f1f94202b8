"""What an explanation holds at the label party: the score of each row, its own columns' attributions, and each
partner's group attribution (with the partner's top-k column names where it shares them).

Example:
    >>> import numpy as np, pandas as pd
    >>> e = Explanation(label_party="bank", ids=["a", "b"], score=np.array([1.0, -1.0]),
    ...                 baseline_score=np.array([0.0, 0.0]),
    ...                 features=pd.DataFrame({"age": [0.7, -0.2]}, index=["a", "b"]),
    ...                 groups=pd.DataFrame({"shop": [0.3, -0.8]}, index=["a", "b"]))
    >>> e.completeness_error().round(6).tolist()
    [0.0, 0.0]
    >>> e.global_importance().round(2).to_dict()
    {'shop': 0.55, 'age': 0.45}
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: the prefix of a partner's group column in :meth:`Explanation.table`
GROUP_PREFIX = "party:"


@dataclass
class Explanation:
    """Per-row attributions of a split model's score (integrated gradients, :mod:`vsplit.explain.machine`).

    Attributes:
        label_party: the party that holds the labels and the score.
        ids: the explained rows' IDs (the rows every party knows, in the agreed order).
        score: the model's score of each row (the log-odds of the positive class for a binary model, the
            prediction for a regression); ``baseline_score``: the score of the baselines (every party's reference
            row), which the attributions start from.
        features: the label party's own columns' attributions (rows: ``ids``).
        groups: each partner's attribution as one group (a column per partner).
        partners: each partner's own per-column attributions; only where that partner's results are at hand (the
            in-process estimator, where every party runs in this process; a partner process keeps its own).
        top: for a partner that shares them, its most influential column names per row.
        steps: the quadrature nodes of the path (``method="quadrature"``).
        method: ``"exact"`` (each row's path split at its breakpoints, integrated exactly: the attributions of a row
            sum to its score difference up to float64 rounding) or ``"quadrature"`` (``steps`` Gauss-Legendre nodes:
            up to the quadrature's error); ``knots``: (exact) the knots of each row's path at the label party, the
            breakpoints of every segment and its two ends; ``note``: why the quadrature was used where it was not
            asked for.
    """

    label_party: str
    ids: list[str]
    score: np.ndarray
    baseline_score: np.ndarray
    features: pd.DataFrame
    groups: pd.DataFrame
    partners: dict[str, pd.DataFrame] = field(default_factory=dict)
    top: dict[str, list[list[str]]] = field(default_factory=dict)
    steps: int = 0
    method: str = "quadrature"
    knots: np.ndarray | None = None
    note: str = ""

    def completeness_error(self) -> np.ndarray:
        """Per row, ``|sum of every attribution - (score - baseline_score)|``: the quadrature's error (float64
        rounding for the exact method)."""
        total = self.features.to_numpy().sum(axis=1) + self.groups.to_numpy().sum(axis=1)
        return np.abs(total - (self.score - self.baseline_score))

    def method_text(self) -> str:
        """How the attributions were integrated, in a sentence for a report or a model card.

        >>> Explanation("bank", [], np.zeros(0), np.zeros(0), pd.DataFrame(), pd.DataFrame(), steps=32).method_text()
        'integrated gradients by a 32-node Gauss-Legendre quadrature'
        """
        if self.method == "exact":
            knots = "" if self.knots is None or not len(self.knots) else \
                f" (mean {float(self.knots.mean()) - 2:.1f}, largest {int(self.knots.max()) - 2} breakpoints per row)"
            return f"exact integrated gradients, each row's path split at its breakpoints{knots}"
        text = f"integrated gradients by a {self.steps}-node Gauss-Legendre quadrature"
        return f"{text} ({self.note})" if self.note else text

    def table(self, *, id_column: str = "id", probabilities: bool = False) -> pd.DataFrame:
        """One row per explained customer: ID (column ``id_column``), score and baseline score (the model's output
        before the sigmoid: log-odds for a binary model, the units of every attribution), with ``probabilities``
        also ``probability`` and ``baseline_probability`` (their sigmoids, the scale of the predictions), then the
        own columns' attributions and ``party:<name>`` for each partner's."""
        out = pd.DataFrame({id_column: self.ids, "score": self.score, "baseline_score": self.baseline_score})
        if probabilities:
            out.insert(3, "probability", 1 / (1 + np.exp(-np.asarray(self.score, dtype=np.float64))))
            out.insert(4, "baseline_probability", 1 / (1 + np.exp(-np.asarray(self.baseline_score, dtype=np.float64))))
        own = self.features.reset_index(drop=True)
        groups = self.groups.reset_index(drop=True).add_prefix(GROUP_PREFIX)
        return pd.concat([out, own, groups], axis=1)

    def global_importance(self) -> pd.Series:
        """Mean absolute attribution of each own column and each partner group, largest first."""
        both = pd.concat([self.features, self.groups], axis=1)
        return both.abs().mean().sort_values(ascending=False, kind="stable")
