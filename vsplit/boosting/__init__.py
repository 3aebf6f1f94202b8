"""Vertical gradient boosting across the cut (SecureBoost class), lossless: the core.

Theory of operation: the label party computes each row's logistic gradient and hessian, quantizes them
(:mod:`vsplit.boosting.gains`), encrypts them once per tree (:mod:`vsplit.he`) and sends them to every partner.
Level by level it tells each partner which node each row is in; a partner, which has binned its own columns
(:mod:`vsplit.boosting.bins`), sums the ciphertexts per node, column and bin (only the smaller of two siblings, only
non-empty cells; the label party derives the rest from totals it already holds), packs the sums and sends them back.
The label party decrypts them, picks the best split over its own plaintext histograms and every partner's, and asks
a partner whose split wins to record it: the partner keeps the column, threshold bin and missing direction under a
record id and answers with the node's left/right rows only. Leaves are the label party's. Prediction takes one
round: each partner evaluates all its recorded splits for the rows asked (:mod:`vsplit.boosting.predict`).
:func:`fit_pooled` is the same algorithm in one place, the oracle. With ``BoostParams.order_categories`` the first
tree's root renumbers every party's categorical codes by the label party's rate (:class:`~vsplit.boosting.messages.
Order`; :func:`pooled_ranks` in one place), so a threshold can split a column's categories by rate.

The machines (:class:`LabelBoost`, :class:`PartnerBoost`) are sans-IO and run over any pump: the node runs them
between organizations (``[model] kind = "boosting"``, :mod:`vsplit.node.boost`; ``vsplit serve`` does not serve
them yet). In a notebook, ``vsplit.SplitBoostClassifier``
(:mod:`vsplit.boosting_estimator`, a front door above this package, as the node is) runs them all in one process,
with per-party explanations (:mod:`vsplit.boosting.explain`).

Example:
    >>> from vsplit.boosting import BoostParams
    >>> BoostParams(trees=3).max_depth
    3
"""

from __future__ import annotations

from vsplit.boosting.bins import Bins, fit_bins, rank_codes
from vsplit.boosting.gains import BoostParams
from vsplit.boosting.label import LabelBoost
from vsplit.boosting.partner import PartnerBoost, PartnerModel
from vsplit.boosting.pooled import fit_pooled, pooled_ranks
from vsplit.boosting.predict import LabelPredict, PartnerPredict
from vsplit.boosting.trees import BoostModel, Split, Tree

__all__ = [
    "Bins",
    "BoostModel",
    "BoostParams",
    "LabelBoost",
    "LabelPredict",
    "PartnerBoost",
    "PartnerModel",
    "PartnerPredict",
    "Split",
    "Tree",
    "fit_bins",
    "fit_pooled",
    "pooled_ranks",
    "rank_codes",
]
