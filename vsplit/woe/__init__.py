"""Weight of evidence and information value across the cut: what a partner's attributes tell about the bank's label.

Theory of operation: each party bins its own attributes on its own aligned rows (:func:`fit_fine_bins`: quantile
bins, one bin per category, missing values in a bin of their own). The label party encrypts each row's pair
(1, label) with the homomorphic layer (:mod:`vsplit.he`); each partner adds the ciphertexts per fine bin of each of
its attributes and returns the sums (:class:`PartnerWoe`); the label party decrypts rows and events per bin
(:class:`LabelWoe`), classes them coarsely on those counts alone (:mod:`vsplit.woe.classing`: merged adjacent bins,
a minimum bin share, an optional monotonic trend) and tells each partner which of its fine bins merge (indices only)
and the WOE of each coarse bin. A partner never sees a label; the label party never sees a value, an edge, or a
row's bin. Both parties then hold a :class:`WoeMap` per attribute of their own.

The public result, for a scorecard or a selection:

- every party: :class:`PartyBinning` (``maps``: a :class:`WoeMap` per attribute, ``iv`` per attribute;
  :meth:`PartyBinning.woe_matrix` turns its own table into WOE values; :meth:`PartyBinning.select` keeps the
  attributes of IV at least ``min_iv`` or the ``top_k`` best);
- the label party: :class:`ValueReport` (a :class:`BinningTable` per attribute of every party: counts, event rate,
  WOE and IV per bin; a partner's attributes named or ``<party>#<k>`` as the partner chose), rendered by
  :func:`vsplit.woe.report.write_value_report`.

Between organizations: ``vsplit bin --config party.toml`` (:mod:`vsplit.node.woe`); in a notebook,
:func:`information_value` over in-memory channels (:mod:`vsplit.woe.notebook`).

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.woe import LabelWoe, fit_fine_bins
    >>> rng = np.random.default_rng(0)
    >>> table = pd.DataFrame({"x": rng.normal(size=400)})
    >>> labels = (table["x"] + rng.normal(size=400) > 1).astype(int)
    >>> fine = fit_fine_bins(table, max_bins=5)
    >>> codes = np.column_stack([f.codes(table[f.name]) for f in fine])
    >>> machine = LabelWoe(fine, codes=codes, labels=labels, partners=[], name="bank")
    >>> _ = machine.start()
    >>> machine.result.summary()[["attribute", "band"]].values.tolist()
    [['x', 'strong']]
"""

from __future__ import annotations

from vsplit.lazy import lazy_attributes
from vsplit.woe.classing import ClassingParams, coarse_classes, woe_iv
from vsplit.woe.fine import FineBins, fit_fine_bins
from vsplit.woe.label import LabelWoe
from vsplit.woe.maps import WoeMap, woe_matrix
from vsplit.woe.partner import PartnerWoe
from vsplit.woe.result import PartyBinning, ValueReport
from vsplit.woe.tables import IV_BANDS, BinningTable, iv_band, ranked, select_attributes

__all__ = [
    "IV_BANDS",
    "BinningTable",
    "ClassingParams",
    "FineBins",
    "LabelWoe",
    "PartnerWoe",
    "PartyBinning",
    "ValueReport",
    "WoeMap",
    "coarse_classes",
    "fit_fine_bins",
    "information_value",
    "iv_band",
    "ranked",
    "select_attributes",
    "woe_iv",
    "woe_matrix",
]

__getattr__, __dir__ = lazy_attributes(__name__, {"information_value": "vsplit.woe.notebook:information_value"})
