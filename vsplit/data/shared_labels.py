"""The label party's check of what it will train on, after matching: the labels of the shared customers.

Before PSI the label party only knows its own table; after it, only the customers every party knows are trained
on, and they may be few, or all of one class (a partner whose customers are a biased subset). Training on them
would "succeed" with a meaningless model and an undefined validation AUC, so the label party stops with a
:class:`~vsplit.errors.DataError` naming the counts and the fix, before anything is trained or written.

Rule: a classifier needs every class among the shared customers at least ``min_per_class`` times, and, when a
validation split is drawn (``validation_fraction > 0``), at least one of each class in it and one left to train on
(the same stratified count :meth:`vsplit.party.LabelParty.make_roles` draws). A regression needs
``min_per_class`` rows and two distinct values.

Example:
    >>> import numpy as np
    >>> check_shared_labels("bank", "y", np.array([0.0, 0.0, 1.0]), task="binary",  # doctest: +ELLIPSIS
    ...                     validation_fraction=0.1, min_per_class=10, classes=["not 'yes'", "'yes'"])
    Traceback (most recent call last):
    ...
    vsplit.errors.DataError: bank: after matching, the 3 shared customers have label 'y' not 'yes' 2 times, ...
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vsplit.errors import DataError

_FIX = ("share more customers (check that every party's ID column holds the same IDs in the same format, and "
        "psi.case_fold), or lower train.min_class_rows")


def _times(n: int) -> str:
    return f"{n} time{'s' if n != 1 else ''}"


def check_shared_labels(party: str, label: str, y: np.ndarray, *, task: str, validation_fraction: float,
                        min_per_class: int, classes: Sequence[str] = ()) -> None:
    """Raise :class:`DataError` if the shared customers' labels ``y`` (encoded) cannot train a model.

    ``classes`` names each encoded class (``y == i``) in messages; tasks other than ``binary``, ``multiclass`` and
    ``regression`` are not checked.
    """
    n = len(y)
    if task == "regression":
        distinct = len(np.unique(y))
        if n < max(min_per_class, 2) or distinct < 2:
            raise DataError(f"{party}: after matching, the {n} shared customers have {distinct} distinct values of "
                            f"label {label!r}; a regression needs at least {max(min_per_class, 2)} rows and two "
                            f"distinct values: {_FIX}")
        return
    if task not in ("binary", "multiclass"):
        return
    counts = [int((y == i).sum()) for i in range(len(classes))]
    seen = ", ".join(f"{name} {_times(c)}" for name, c in zip(classes, counts, strict=True))
    if sum(1 for c in counts if c) < 2:
        only = next((name for name, c in zip(classes, counts, strict=True) if c), "none")
        raise DataError(f"{party}: after matching, the {n} shared customers all have label {label!r} {only} "
                        f"({seen}); a classifier needs both classes among them: {_FIX}")
    for name, c in zip(classes, counts, strict=True):
        held = round(validation_fraction * c)  # the count make_roles holds out of this class
        short = c < min_per_class or (validation_fraction > 0 and (held < 1 or c - held < 1))
        if short:
            room = (f", and with train.validation_fraction = {validation_fraction} at least one of each in "
                    "validation and one to train on" if validation_fraction > 0 else "")
            raise DataError(f"{party}: after matching, the {n} shared customers have label {label!r} {seen}; "
                            f"training needs each class at least {min_per_class} times (train.min_class_rows){room}; "
                            f"{name} falls short: {_FIX}")
