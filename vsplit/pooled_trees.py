"""The pooled twin of :class:`~vsplit.boosting_estimator.SplitBoostClassifier`: the same trees trained in one place.

:class:`PooledBoostClassifier` aligns, bins, holds out validation rows, stops early and scores exactly as
:class:`~vsplit.boosting_estimator.SplitBoostClassifier` does; only the training differs: every party's bin codes are
pooled in this process and boosted in plaintext by :func:`vsplit.boosting.fit_pooled` (the split protocol's oracle),
with no encryption and no message. Split across the cut the trees come out equal (same splits, leaves within 1e-6:
tests/test_boosting_estimator.py), so this twin is what "the same trees in one place" means in
``benchmarks/quality.py`` (``pooled_trees``) and it is fast enough to choose the trees' parameters on validation rows
(:func:`vsplit.ensemble.choose_trees`). Each partner's :class:`~vsplit.boosting.partner.PartnerModel` is read off the
pooled trees (its splits in the order the trees grew them), so prediction, early stopping and explanations run
through the same code as the split estimator's.

Example:
    >>> import numpy as np, pandas as pd, warnings
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(300)]
    >>> x, age = rng.normal(size=300), rng.normal(size=300)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": (x + age > 0).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1]})}
    >>> twin = PooledBoostClassifier(n_estimators=3, max_depth=2).fit(views)
    >>> twin.predict_proba(views).shape, twin.evaluate(views)["auc"] > 0.8
    ((300, 2), True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vsplit.boosting import BoostModel, BoostParams, PartnerModel, fit_pooled, pooled_ranks, rank_codes
from vsplit.boosting_estimator import SplitBoostClassifier

__all__ = ["PooledBoostClassifier", "partner_models_of"]


class PooledBoostClassifier(SplitBoostClassifier):
    """:class:`~vsplit.boosting_estimator.SplitBoostClassifier`'s parameters and attributes, trained on the pooled
    bin codes in one process (no encryption: ``scheme`` and ``key_bits`` are not used)."""

    def _train(self, codes: Mapping[str, np.ndarray], labels: np.ndarray,
               params: BoostParams) -> tuple[BoostModel, dict[str, PartnerModel], dict[str, np.ndarray | None]]:
        order = [self.label_party, *self.partners_]
        widths = [self.bins_[n].width for n in order]
        ranks = dict.fromkeys(order)
        if params.order_categories:  # as the split protocol orders them at the first tree's root
            ranks = dict(zip(order, pooled_ranks([codes[n] for n in order], labels, widths=widths, params=params,
                                                 categorical=[self.bins_[n].categorical for n in order]),
                             strict=True))
        model = fit_pooled([rank_codes(codes[n], ranks[n]) for n in order], labels, widths=widths, params=params)
        return model, partner_models_of(model, self.partners_), ranks


def partner_models_of(model: BoostModel, partners: list[str]) -> dict[str, PartnerModel]:
    """Each partner's recorded splits of ``model`` (partner ``k`` is party ``k + 1``), by record id.

    Example:
        >>> from vsplit.boosting import Split, Tree
        >>> tree = Tree(splits={0: Split(party=1, column=2, bin=3, missing_left=True, record=0)},
        ...             leaves={1: 0.1, 2: -0.1})
        >>> partner_models_of(BoostModel(trees=(tree,), base=0.0, widths=(4, 5)), ["shop"])["shop"].columns.tolist()
        [2]
    """
    out: dict[str, Any] = {}
    for k, name in enumerate(partners, start=1):
        splits = sorted((s.record, s) for tree in model.trees for s in tree.splits.values() if s.party == k)
        out[name] = PartnerModel(columns=np.array([s.column for _, s in splits], dtype=np.int64),
                                 bins=np.array([s.bin for _, s in splits], dtype=np.int64),
                                 missing_left=np.array([s.missing_left for _, s in splits], dtype=bool),
                                 width=int(model.widths[k]))
    return out
