"""Split one table into the per-party tables that separate organizations would hold.

Theory of operation: every source row is one customer, who gets a random 10-digit string ID (never the row
number). The label party knows every customer and holds the label. Every other party knows a random
``overlap`` share of those customers plus ``extra * n`` people the label party has never seen: their IDs are
fresh and their feature values are whole rows of that party's columns copied from randomly chosen real
customers, so only a private set intersection can tell them apart. Each party keeps its rows in its own
random order. All randomness comes from ``seed``: one stream draws the IDs, and each party has its own stream
keyed by its name, so the result does not depend on the order of ``columns``.
"""

from __future__ import annotations

import math
import numbers
import zlib
from collections.abc import Iterable

import numpy as np
import pandas as pd

from vsplit.errors import ConfigError, DataError

_ID_LOW, _ID_HIGH = 10**9, 10**10  # 10-digit IDs without a leading zero


def partition(
    df: pd.DataFrame,
    *,
    columns: dict[str, list[str]],
    label_party: str,
    label: str,
    overlap: float = 0.85,
    extra: float = 0.10,
    id_column: str = "customer_id",
    seed: int,
    reserved_ids: Iterable[str] = (),
) -> dict[str, pd.DataFrame]:
    """Turn one table into the tables each party holds, as in a real vertical split.

    Args:
        df: The source table, one customer per row.
        columns: Party name -> the columns that party holds. The parties' lists must not share columns.
        label_party: The party that knows every customer and holds the label.
        label: The label column; it must be in ``columns[label_party]``.
        overlap: Share of the customers each other party also knows, in (0, 1]. Counts are rounded.
        extra: Each other party also holds ``extra * len(df)`` people unknown to the label party (>= 0).
        id_column: Name of the generated customer ID column, put first in every table.
        seed: Non-negative integer; the same seed gives identical tables.
        reserved_ids: IDs that must not be generated, e.g. the train split's when partitioning the test split,
            so that the two hold different customers.

    Returns:
        Party name -> table (in the order of ``columns``): the ID column (strings), then the party's own
        columns, rows in the party's own order, index 0..len-1.

    Raises:
        ConfigError: a bad argument (unknown party, shared column, misplaced label, overlap out of range...).
        DataError: ``df`` is empty, lacks a column, or is too small for the requested overlap.

    Example:
        >>> df = pd.DataFrame({"age": range(20, 40), "income": range(20), "y": [0, 1] * 10})
        >>> tables = partition(df, columns={"bank": ["age", "y"], "shop": ["income"]},
        ...                    label_party="bank", label="y", overlap=0.5, extra=0.25, seed=7)
        >>> [(name, len(table), list(table.columns)) for name, table in tables.items()]
        [('bank', 20, ['customer_id', 'age', 'y']), ('shop', 15, ['customer_id', 'income'])]
        >>> len(set(tables["bank"].customer_id) & set(tables["shop"].customer_id))
        10
    """
    _check(df, columns=columns, label_party=label_party, label=label, id_column=id_column)
    overlap = _number("overlap", overlap, low=0.0, high=1.0, low_open=True)
    extra = _number("extra", extra, low=0.0, high=math.inf)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    n = len(df)
    shared, added = math.floor(overlap * n + 0.5), math.floor(extra * n + 0.5)
    if shared == 0:
        raise DataError(f"overlap {overlap} of {n} rows leaves the other parties no shared customer; "
                        "raise overlap or pass more rows")

    others = sorted(party for party in columns if party != label_party)
    ids = _new_ids(np.random.default_rng([int(seed), 0]), n + added * len(others), reserved=reserved_ids)
    real_ids = ids[:n]
    extra_ids = {party: ids[n + i * added : n + (i + 1) * added] for i, party in enumerate(others)}

    source = df.reset_index(drop=True)
    tables: dict[str, pd.DataFrame] = {}
    for party, party_columns in columns.items():
        rng = np.random.default_rng([int(seed), 1, zlib.crc32(party.encode("utf-8"))])
        if party == label_party:
            rows, party_ids = np.arange(n), real_ids
        else:
            known = rng.choice(n, size=shared, replace=False)
            copied_from = rng.integers(0, n, size=added)
            rows = np.concatenate([known, copied_from])
            party_ids = np.concatenate([real_ids[known], extra_ids[party]])
        order = rng.permutation(len(rows))
        table = source[list(party_columns)].iloc[rows[order]].reset_index(drop=True)
        table.insert(0, id_column, pd.Series(party_ids[order], dtype=str))
        tables[party] = table
    return tables


def partition_train_test(
    df: pd.DataFrame,
    *,
    columns: dict[str, list[str]],
    label_party: str,
    label: str,
    seed: int,
    test_size: float = 0.2,
    overlap: float = 0.9,
    extra: float = 0.05,
) -> dict[str, dict[str, pd.DataFrame]]:
    """``df`` cut into stratified train and test rows (``seed``), each partitioned into the parties' tables
    (:func:`partition`, seeds ``seed`` and ``seed + 1``) so that no test ID is a training ID:
    ``{"train": {party: table}, "test": {party: table}}``.

    Example:
        >>> df = pd.DataFrame({"a": range(40), "b": range(40), "y": ["no", "yes"] * 20})
        >>> t = partition_train_test(df, columns={"bank": ["a", "y"], "shop": ["b"]}, label_party="bank", label="y",
        ...                          seed=0)
        >>> len(t["train"]["bank"]), len(t["test"]["bank"])
        (32, 8)
    """
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(df, test_size=test_size, stratify=df[label], random_state=seed)
    split = {"columns": columns, "label_party": label_party, "label": label, "overlap": overlap, "extra": extra}
    tables = {"train": partition(train, seed=seed, **split)}
    used = set().union(*(t["customer_id"] for t in tables["train"].values()))
    tables["test"] = partition(test, seed=seed + 1, reserved_ids=used, **split)
    return tables


def _new_ids(rng: np.random.Generator, count: int, *, reserved: Iterable[str]) -> np.ndarray:
    """Draw ``count`` distinct 10-digit numeric strings, none of them in ``reserved``."""
    taken = set(reserved)
    ids: list[str] = []
    while len(ids) < count:
        for value in rng.integers(_ID_LOW, _ID_HIGH, size=count - len(ids)):
            text = str(value)
            if text not in taken:
                taken.add(text)
                ids.append(text)
    return np.array(ids, dtype=object)


def _number(name: str, value: object, *, low: float, high: float, low_open: bool = False) -> float:
    """Return ``value`` as a float after checking it is a real number in its range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    too_low = value <= low if low_open else value < low
    if too_low or value > high or math.isinf(value):
        opening = "(" if low_open else "["
        bounds = f"finite and >= {low}" if math.isinf(high) else f"in {opening}{low}, {high}]"
        raise ConfigError(f"{name} must be {bounds}, got {value}")
    return float(value)


def _check(
    df: pd.DataFrame, *, columns: dict[str, list[str]], label_party: str, label: str, id_column: str
) -> None:
    """Raise a ConfigError or DataError naming the first problem with the inputs and its fix."""
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"partition needs a pandas DataFrame, got {type(df).__name__}")
    if df.empty:
        raise DataError("the source table has no rows; pass a table with one customer per row")
    if df.columns.duplicated().any():
        twice = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
        raise DataError(f"the source table has duplicate column names {twice}; rename them first")
    if not isinstance(columns, dict) or not columns:
        raise ConfigError("columns must be a non-empty dict: party name -> list of its column names")
    if label_party not in columns:
        raise ConfigError(f"label_party {label_party!r} is not a party in columns ({', '.join(columns)}); "
                          "add it to columns or fix the name")
    owner: dict[str, str] = {}
    for party, party_columns in columns.items():
        if not isinstance(party, str) or not party:
            raise ConfigError(f"party names must be non-empty strings, got {party!r}; rename it in columns")
        if isinstance(party_columns, str) or not party_columns:
            raise ConfigError(f"columns[{party!r}] must be a non-empty list of column names")
        for column in party_columns:
            if column in owner:
                where = "twice" if owner[column] == party else f"to both {owner[column]!r} and {party!r}"
                raise ConfigError(f"column {column!r} is given {where}; give each column to one party once")
            owner[column] = party
    missing = [column for column in owner if column not in df.columns]
    if missing:
        raise DataError(f"columns {missing} are not in the source table; use names from {list(df.columns)}")
    if owner.get(label) != label_party:
        place = f"given to {owner[label]!r}" if label in owner else "not in any party's columns"
        raise ConfigError(f"label {label!r} is {place}; add it to columns[{label_party!r}]")
    if id_column in owner:
        raise ConfigError(f"id_column {id_column!r} is also a data column of {owner[id_column]!r}; "
                          "pass another id_column name")
