"""The positive class of a binary label, by the rule every binary model of vsplit uses (no PyTorch here).

Example:
    >>> positive_class({"no", "yes"}, "y")
    'yes'
    >>> positive_class({0, 1}, "y")
    1
"""

from __future__ import annotations

from collections.abc import Set

from vsplit.errors import DataError

#: label pairs whose positive class is known: 1, True, "yes", "1"
KNOWN_PAIRS = ({0, 1}, {False, True}, {"no", "yes"}, {"0", "1"})


def positive_class(values: Set[object], name: str) -> object:
    """The positive one of two distinct label ``values`` of column ``name`` if the pair is a known one
    (:data:`KNOWN_PAIRS`), else a :class:`DataError` asking for ``positive_label``."""
    for candidates in KNOWN_PAIRS:
        if values <= candidates:
            return "yes" if candidates == {"no", "yes"} else max(candidates)
    raise DataError(f"label {name!r} has values {sorted(map(str, values))}; set data.positive_label (positive_label= "
                    "in the estimator) to the positive one")
