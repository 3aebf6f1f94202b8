"""Categories training never saw: which categorical columns of each scored row hold one.

A fitted :class:`~vsplit.data.preprocess.TablePreprocessor` maps a category it never saw to code 0, the "unknown"
code, and the model scores the row all the same. These functions say which rows that happened to, and in which
columns, so an answer can carry the flag: the estimator warns (:class:`UnseenCategoryWarning`), ``vsplit predict``
writes the ``unseen_categories`` column of ``predictions.csv`` and ``vsplit serve`` a ``warnings`` entry per column.
A missing value counts as its own category (``"<missing>"`` under ``data.missing = "impute"``): unseen only if
training had none in that column.

Example:
    >>> import pandas as pd
    >>> from vsplit.data.preprocess import TablePreprocessor
    >>> prep = TablePreprocessor().fit(pd.DataFrame({"job": ["a", "b"], "x": [1.0, 2.0]}))
    >>> unseen_in_table(prep, pd.DataFrame({"job": ["b", "pilot"], "x": [1.0, 3.0]}))
    [[], ['job']]
    >>> unseen_in_rows(prep, [{"job": "pilot", "x": 1.0}, {"job": "a", "x": 1.0}])
    [['job'], []]
    >>> unseen_message("bank", {"job": 1}, rows=2)
    "bank: 1 of 2 rows hold a category training never saw in column 'job' (scored as an unknown category)"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from vsplit.data.preprocess import MISSING

#: the ``code`` of a serving answer's warning for such a column
CODE = "unseen_category"


class UnseenCategoryWarning(UserWarning):
    """Rows were scored with a category of some column that training never saw (as the unknown category)."""


def unseen_in_table(preprocessor: Any, table: pd.DataFrame) -> list[list[str]]:
    """For each row of ``table``: its categorical columns whose value ``preprocessor`` never saw in training."""
    out: list[list[str]] = [[] for _ in range(len(table))]
    if preprocessor is None:
        return out
    for column in preprocessor.categorical_:
        known = preprocessor.categories_[column]
        filled = table[column].astype(object).where(table[column].notna(), MISSING)
        for i, value in enumerate(filled):
            if str(value) not in known:
                out[i].append(column)
    return out


def unseen_in_rows(preprocessor: Any, rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """For each row (``{column: value}``, as a serving request gives it): its categorical columns whose value
    ``preprocessor`` never saw in training. A dictionary lookup per categorical column and row: cheap enough for the
    scoring path."""
    out: list[list[str]] = [[] for _ in rows]
    if preprocessor is None:
        return out
    for column in preprocessor.categorical_:
        known = preprocessor.categories_[column]
        for i, row in enumerate(rows):
            value = row.get(column)
            if (MISSING if value is None else str(value)) not in known:
                out[i].append(column)
    return out


def unseen_counts(flags: Sequence[Sequence[str]]) -> dict[str, int]:
    """How many rows hold an unseen category, per column, in the order the columns first appear."""
    counts: dict[str, int] = {}
    for columns in flags:
        for column in columns:
            counts[column] = counts.get(column, 0) + 1
    return counts


def unseen_message(party: str, counts: Mapping[str, int], *, rows: int) -> str:
    """One sentence naming ``party``'s columns with unseen categories and how many of ``rows`` rows hold one."""
    parts = [f"{n} of {rows} rows hold a category training never saw in column {c!r}" for c, n in counts.items()]
    return f"{party}: {'; '.join(parts)} (scored as an unknown category)"
