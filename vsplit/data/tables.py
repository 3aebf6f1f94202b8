"""Checks on a party's own table: ID column, label placement, emptiness, duplicate IDs.

Example:
    >>> import pandas as pd
    >>> check_table("partner"  # doctest: +ELLIPSIS
    ...     , pd.DataFrame({"customer_id": ["a", "a"], "x": [1, 2]}), id_column="customer_id")
    Traceback (most recent call last):
    ...
    vsplit.errors.DataError: partner: 1 duplicate customer IDs in 'customer_id' (e.g. 'a' at rows 1, 2); ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from vsplit.errors import DataError


def normalise_ids(ids: pd.Series) -> np.ndarray:
    """IDs as stripped strings (integers become their decimal text)."""
    return np.asarray([str(v).strip() for v in ids], dtype=object)


def all_ids(ids: Any) -> np.ndarray:
    """A party's IDs as :func:`normalise_ids` gives them, from an array or an ID source read batch by batch."""
    if isinstance(ids, np.ndarray):
        return ids
    return np.asarray([str(v).strip() for batch in ids.batches(65536) for v in batch], dtype=object)


def check_columns(party: str, columns: Sequence[str], *, rows: int | None, id_column: str, label: str | None = None,
                  forbidden: Sequence[str] = ()) -> None:
    """The column checks of :func:`check_table` on a table's column names (and its row count, unless ``None``)."""
    if rows == 0:
        raise DataError(f"{party}: the table is empty; give this party at least one row")
    if id_column not in columns:
        raise DataError(f"{party}: ID column {id_column!r} is missing; add it or set data.id_column to the right name")
    if label is not None and label not in columns:
        raise DataError(f"{party}: label column {label!r} is missing; the label party's table must hold the label "
                        "(data.label names it)")
    for column in forbidden:
        if column in columns:
            raise DataError(
                f"{party}: has the label column {column!r}, but only the label party may hold labels; "
                f"drop it from {party}'s table or make {party} the label party"
            )


def check_table(
    party: str,
    table: pd.DataFrame,
    *,
    id_column: str,
    label: str | None = None,
    forbidden: Sequence[str] = (),
    require_rows: bool = True,
) -> None:
    """Raise :class:`DataError` naming the problem and the fix if ``table`` cannot be used by ``party``.

    ``label`` is the label column this party must have (label party only); ``forbidden`` lists columns it must not
    have (the label, on a feature party).
    """
    if not isinstance(table, pd.DataFrame):
        raise DataError(f"{party}: expected a pandas DataFrame, got {type(table).__name__}")
    check_columns(party, list(table.columns), rows=len(table) if require_rows else None, id_column=id_column,
                  label=label, forbidden=forbidden)
    ids = table[id_column]
    if ids.isna().any():
        rows = ", ".join(str(r + 1) for r in np.flatnonzero(ids.isna().to_numpy())[:5])
        raise DataError(f"{party}: {int(ids.isna().sum())} rows have no customer ID (rows {rows}, counted from 1); "
                        "drop or fill them")
    normal = pd.Series(normalise_ids(ids))
    duplicated = normal[normal.duplicated()]
    if len(duplicated):
        first = duplicated.iloc[0]
        rows = ", ".join(str(r + 1) for r in np.flatnonzero((normal == first).to_numpy())[:5])
        raise DataError(
            f"{party}: {len(duplicated)} duplicate customer IDs in {id_column!r} (e.g. {first!r} at rows {rows}); "
            "each customer must appear once: deduplicate the table"
        )
