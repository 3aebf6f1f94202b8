"""A boosted model's explanation at the label party: per-party contributions by path attribution, as an
:class:`~vsplit.explain.explanation.Explanation` that reason codes and ``vsplit explain``'s files take as they are.

The arithmetic is :mod:`vsplit.boosting.explain`; this module puts its numbers under the label party's column names
and the partners' names, and checks that they add up. The notebook estimator (``SplitBoostClassifier.explain``) and
``vsplit explain`` of a boosting run (:mod:`vsplit.explain.process`) both call :func:`explain_trees`, so they give
the same numbers for the same model and rows.

Example:
    >>> import numpy as np
    >>> from vsplit.boosting.explain import kept_values
    >>> from vsplit.boosting.gains import BoostParams
    >>> from vsplit.boosting.trees import BoostModel, Split, Tree
    >>> tree = Tree(splits={0: Split(party=1, column=0, bin=0, missing_left=False, record=0)},
    ...             leaves={1: -0.45, 2: 0.45}, sums={1: (3 * 2**16, 2**16), 2: (-3 * 2**16, 2**16)})
    >>> model = BoostModel(trees=(tree,), base=0.0, widths=(3, 3))
    >>> values = kept_values(model, BoostParams())
    >>> e = explain_trees(model, values, own_codes=np.zeros((2, 1), np.int64), ids=["a", "b"],
    ...                   decisions={1: np.array([[1], [0]], np.uint8)}, own_columns=["age"], partners=["shop"],
    ...                   label_party="bank")
    >>> e.parties().round(3).values.tolist()
    [[0.0, 0.0, -0.45, -0.45], [0.0, 0.0, 0.45, 0.45]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from vsplit.boosting.explain import contributions
from vsplit.boosting.trees import BoostModel
from vsplit.errors import ProtocolError
from vsplit.explain.explanation import Explanation

__all__ = ["PathExplanation", "explain_trees"]

#: the largest ``|sum of contributions - (margin - baseline)|`` accepted (float64 rounding over the trees)
TOLERANCE = 1e-9


@dataclass
class PathExplanation(Explanation):
    """An :class:`~vsplit.explain.explanation.Explanation` of a boosted model by path attribution: ``score`` is each
    row's margin (log-odds), ``baseline_score`` the margin every row starts from (the trees' expected value over
    their training rows), ``features`` the credits of the label party's own columns and ``groups`` each partner's;
    they add up to the margin up to float64 rounding."""

    method: str = "path"

    def method_text(self) -> str:
        """How the attributions were made, in a sentence for a report or a model card."""
        return ("path attribution (Saabas): each split's change of the node value credited to the party owning the "
                "split, exact up to float64 rounding")

    def parties(self) -> pd.DataFrame:
        """Per row (index: ID): ``baseline``, the label party's total, each partner's, and ``margin``."""
        out = pd.DataFrame({"baseline": self.baseline_score, self.label_party: self.features.to_numpy().sum(axis=1)},
                           index=self.ids)
        out[list(self.groups.columns)] = self.groups.to_numpy()
        out["margin"] = self.score
        return out

    def by_party(self) -> Explanation:
        """The same attributions with the label party's columns summed into one, for reason codes by party:
        ``vsplit.explain.reasons.reason_codes(e.by_party())`` names the parties costing each declined row most."""
        own = pd.DataFrame({self.label_party: self.features.to_numpy().sum(axis=1)}, index=self.ids)
        return PathExplanation(label_party=self.label_party, ids=self.ids, score=self.score,
                               baseline_score=self.baseline_score, features=own, groups=self.groups, top=self.top)


def explain_trees(model: BoostModel, values: Sequence[Mapping[int, float]], *, own_codes: np.ndarray,
                  decisions: Mapping[int, np.ndarray], ids: Sequence[str], own_columns: Sequence[str],
                  partners: Sequence[str], label_party: str) -> PathExplanation:
    """Per-party contributions of each row's margin (rows: ``ids``, in the order of ``own_codes`` and the bits).

    Args:
        model: the label party's trees.
        values: every node's value per tree (:func:`~vsplit.boosting.explain.kept_values`).
        own_codes: the label party's bin codes of the rows; ``decisions``: each partner's bits (partner index from 1,
            as the prediction round gives them).
        own_columns: the label party's column names (its codes' order); ``partners``: the partners' names in the
            model's order.

    Raises:
        ProtocolError: (a bug) the contributions do not add up to the margin.
    """
    bias, own, parties = contributions(model, values, own_codes=own_codes, decisions=decisions,
                                       partners=len(partners))
    margin = model.margins(own_codes=own_codes, decisions=decisions)
    index = [str(i) for i in ids]
    out = PathExplanation(
        label_party=label_party, ids=index, score=margin, baseline_score=np.full(len(margin), bias),
        features=pd.DataFrame(own, columns=list(own_columns), index=index),
        groups=pd.DataFrame(parties[:, 1:], columns=list(partners), index=index),
    )
    worst = float(out.completeness_error().max(initial=0.0))
    if worst > TOLERANCE:
        raise ProtocolError(f"boosting explanations: contributions miss the margin by {worst:.3g}", local=True)
    return out
