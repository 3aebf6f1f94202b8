"""How a column's type is fixed, by rule, and what happens to the values that break it.

Rule (when ``data.categorical`` does not list the categorical columns): a column of numbers is numeric; a column
of text, booleans or pandas categories is categorical, except a text column whose values are mostly numbers (at
least :data:`MOSTLY` of the values present): that is a numeric column with a few stray strings, as one typo in a
CSV makes. It is refused, naming the values and their rows, unless ``data.coerce_numbers`` is set: then the strays
become missing values (and ``data.missing`` decides: refuse, or impute), with a warning. Infinities count as missing
values too. Without this rule one stray string silently turned a numeric column into ~1,000 categories.

Rows are counted from 1, the first data row (line 2 of a CSV file with a header).

Example:
    >>> import pandas as pd
    >>> column = pd.Series(["1.5", "2", "abc", "4", "5", "6", "7", "8", "9", "10"], name="spend")
    >>> mostly_numbers(column)
    True
    >>> to_numbers(column, coerce=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.DataError: column 'spend' is numbers but for 1 text value: 'abc' at row 3; ...
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from vsplit.errors import DataError

#: the share of a text column's present values that must be numbers for it to count as a numeric column
MOSTLY = 0.9
CHUNK = 65536


def _parsed(series: pd.Series) -> pd.Series:
    """The values as numbers (NaN where a present value is not a number)."""
    return pd.to_numeric(series.astype(str).str.strip(), errors="coerce").where(series.notna())


def mostly_numbers(series: pd.Series) -> bool:
    """True for a text column whose present values are at least :data:`MOSTLY` numbers (and not all numbers
    written as text, which stays categorical as its dtype says)."""
    if not (ptypes.is_object_dtype(series) or ptypes.is_string_dtype(series)):
        return False
    present = series.dropna()
    stray = 0
    for start in range(0, len(present), CHUNK):  # a text column stops at its first ~10 % of values
        stray += int(_parsed(present.iloc[start:start + CHUNK]).isna().sum())
        if len(present) - stray < MOSTLY * len(present):
            return False
    return stray > 0


def show(value: object) -> str:
    """A cell as an error shows it: ``'abc'``, ``inf``, ``nan`` (NumPy scalars as plain Python values)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def where(mask: np.ndarray, values: pd.Series, *, limit: int = 5) -> str:
    """``'abc' at row 3, 'x' at row 9`` for the first ``limit`` rows of ``mask`` (rows counted from 1)."""
    rows = np.flatnonzero(mask)
    shown = ", ".join(f"{show(values.iloc[r])} at row {r + 1}" for r in rows[:limit])
    return shown + (f" (and {len(rows) - limit} more)" if len(rows) > limit else "")


def to_numbers(series: pd.Series, *, coerce: bool) -> pd.Series:
    """``series`` (a numeric column) as float numbers: stray text refused, or, with ``coerce``, made missing with
    a warning."""
    if ptypes.is_numeric_dtype(series) and not ptypes.is_bool_dtype(series):
        return series
    parsed = _parsed(series)
    stray = (parsed.isna() & series.notna()).to_numpy()
    if not stray.any():
        return parsed
    name = str(series.name)
    n = int(stray.sum())
    found = f"column {name!r} is numbers but for {n} text value{'s' if n > 1 else ''}: {where(stray, series)}"
    if not coerce:
        raise DataError(f"{found}; fix those cells, list {name!r} in data.categorical if it is a category, or set "
                        "data.coerce_numbers = true to treat them as missing values (data.missing then applies)")
    warnings.warn(f"{found}; treated as missing values (data.coerce_numbers = true)", UserWarning, stacklevel=3)
    return parsed
