"""Record alignment: which rows of each party's table belong to the same customers, in one agreed order.

:func:`plain_join` is the in-process stand-in: it compares raw IDs, so it is only for data that already sits in one
process (tests, notebooks with both views). Between organizations the private set intersection in
:mod:`vsplit.psi` fills the same role without revealing anyone outside the overlap.

Example:
    >>> import numpy as np
    >>> rows = plain_join({"bank": np.array(["a", "b", "c"], object), "partner": np.array(["c", "a"], object)})
    >>> {p: r.tolist() for p, r in rows.items()}
    {'bank': [0, 2], 'partner': [1, 0]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vsplit.errors import AlignmentError


def canonical_rows(alignment: Any) -> np.ndarray:
    """A PSI alignment's rows in sorted-ID order, so every run over the same data uses the same order.

    The order PSI agrees on depends on the session's random keys; sorting by the (normalised) ID, which both
    parties learn in ``reveal="both"`` mode, makes training reproducible across runs and runtimes. Without IDs
    (the partner in ``reveal="label_party"`` mode) the label party's order is kept as told.
    """
    if alignment.ids is None:
        return np.asarray(alignment.rows, dtype=np.int64)
    order = np.argsort(np.asarray(alignment.ids, dtype=object), kind="stable")
    return np.asarray(alignment.rows, dtype=np.int64)[order]


def plain_join(ids: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Row indices of every party's shared customers, in sorted-ID order (IDs must be unique per party)."""
    shared: set[str] | None = None
    for party_ids in ids.values():
        shared = set(party_ids) if shared is None else shared & set(party_ids)
    order = sorted(shared or ())
    if not order:
        raise AlignmentError(f"the parties {sorted(ids)} share no customers; check that they use the same ID scheme")
    rows = {}
    for party, party_ids in ids.items():
        position = {v: i for i, v in enumerate(party_ids)}
        rows[party] = np.fromiter((position[v] for v in order), dtype=np.int64, count=len(order))
    return rows
