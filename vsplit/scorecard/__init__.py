"""The vertical scorecard across the cut: logistic regression on WOE-binned attributes, scaled to points.

Theory of operation: each party holds its own WOE inputs (:class:`WoeColumns`: per attribute a coarse bin per row and
a WOE value per bin, from the binning across the cut, :mod:`vsplit.woe`) and its own coefficients; the label party
holds the labels and the intercept. Training is deterministic full-batch Nesterov descent (:class:`ScorecardParams`)
protected as FATE's hetero LR is: every step each partner sends its per-row linear score, the label party sends the
residuals encrypted (:mod:`vsplit.he`), each partner sums them per bin, weights the bin sums by its WOE values, masks
the result and sends it back for decryption (:class:`LabelScorecard`, :class:`PartnerScorecard`). A partner never
sees a label or a residual; the label party sees per-row linear scores, never a partner's WOE, bin or coefficient.
:func:`fit_pooled` is the same optimiser on the pooled WOE matrix, the oracle. Each party then scales its
coefficients to its own points table (:class:`PointsTable`, :class:`Scaling`); scoring is one round: each partner
sends each row's points (:class:`LabelPoints`, :class:`PartnerPointsMachine`).

Example:
    >>> from vsplit.scorecard import ScorecardParams
    >>> ScorecardParams(iterations=10).learning_rate
    2.0
"""

from __future__ import annotations

from vsplit.scorecard.columns import WoeColumns, columns_from_maps
from vsplit.scorecard.label import LabelScorecard
from vsplit.scorecard.params import ScorecardParams
from vsplit.scorecard.partner import PartnerScorecard
from vsplit.scorecard.points import PointsTable, Scaling, top_reasons
from vsplit.scorecard.pooled import fit_pooled, sigmoid
from vsplit.scorecard.predict import LabelPoints, PartnerPointsMachine

__all__ = [
    "LabelPoints",
    "LabelScorecard",
    "PartnerPointsMachine",
    "PartnerScorecard",
    "PointsTable",
    "Scaling",
    "ScorecardParams",
    "WoeColumns",
    "columns_from_maps",
    "fit_pooled",
    "sigmoid",
    "top_reasons",
]
