"""Read a party's own table from a Parquet or CSV file, keeping the configured columns.

Example:
    >>> import tempfile, pathlib, pandas as pd
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "partner.csv"
    >>> pd.DataFrame({"customer_id": [1, 2], "spend": [3.0, 4.0], "junk": [0, 0]}).to_csv(path, index=False)
    >>> table = read_table(path, id_column="customer_id", features=["spend"])
    >>> list(table.columns), table["customer_id"].tolist()
    (['customer_id', 'spend'], ['1', '2'])
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd

from vsplit.errors import DataError


def read_table(
    path: str | Path,
    *,
    id_column: str,
    features: Sequence[str] | None = None,
    label: str | None = None,
    option: str = "data.path",
) -> pd.DataFrame:
    """The ID column (as strings), the feature columns (default: all others) and the label, from ``path``.

    ``option`` names where the path came from (a config key such as ``data.test_path``, or a command-line flag
    such as ``--input``), so an error points at what to fix."""
    path = Path(path)
    if not path.is_file():
        where = f"the {option} option" if option.startswith("-") else f"{option} in the party config"
        raise DataError(f"data file {path} not found; check {where}")
    suffix = path.suffix.lower()
    parquet = suffix in (".parquet", ".pq")
    if not parquet and not (suffix in (".csv", ".txt") or path.name.endswith(".csv.gz")):
        raise DataError(f"{path}: unknown file type {suffix!r}; use .parquet or .csv")
    unreadable: tuple[type[BaseException], ...] = (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError)
    if parquet:  # every pyarrow error (some are no ValueError, e.g. on a 128-bit int), and a mangled pandas
        # schema metadata, which pyarrow reads without checking (KeyError, TypeError, ... in pandas_compat)
        unreadable += (__import__("pyarrow").ArrowException, KeyError, TypeError, AttributeError, IndexError)
    try:
        table = pd.read_parquet(path) if parquet else pd.read_csv(path, dtype={id_column: str}, sep=_delimiter(path))
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty (no header line, no rows); export the table again with a header "
                        "line and at least one row") from None
    except unreadable as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        kind = "Parquet" if parquet else "CSV (UTF-8, one header line)"
        raise DataError(f"{path}: cannot be read as {kind}: {reason}; export the table again") from None
    if len(table) == 0:
        raise DataError(f"{path}: has a header line but no rows; give this party at least one row")
    wanted = [id_column, *(features if features is not None else []), *([label] if label else [])]
    if missing := [c for c in wanted if c not in table.columns]:
        keys = column_keys(missing, id_column=id_column, label=label)
        fix = f"fix {keys} in the party config" if not option.startswith("-") else \
            f"give {option} a table with these columns, or fix {keys} in the party config"
        raise DataError(f"{path}: columns {missing} not found (it has {list(table.columns)}); {fix}")
    if features is not None:
        table = table[list(dict.fromkeys(wanted))]
    table = table.copy()
    table[id_column] = table[id_column].astype(str)
    return table


def column_keys(missing: Sequence[str], *, id_column: str, label: str | None = None) -> str:
    """The config keys that named the ``missing`` columns, for an error to say which to fix.

    Example:
        >>> column_keys(["id", "age"], id_column="id")
        'data.id_column and data.features'
    """
    keys = ["data.id_column" if c == id_column else "data.label" if c == label else "data.features" for c in missing]
    return " and ".join(dict.fromkeys(keys))


@contextlib.contextmanager
def about_file(path: str | Path | None) -> Iterator[None]:
    """Name ``path`` in a :class:`DataError` raised inside (unless it names it already): the file, as well as the
    column and row the error gives.

    >>> with about_file("bank.csv"):  # doctest: +ELLIPSIS
    ...     raise DataError("column 'age' is numbers but for 1 text value: 'x' at row 3; fix that cell")
    Traceback (most recent call last):
    ...
    vsplit.errors.DataError: bank.csv: column 'age' is numbers but for 1 text value: 'x' at row 3; fix that cell
    """
    try:
        yield
    except DataError as exc:
        if path is None or str(path) in str(exc):
            raise
        raise DataError(f"{path}: {exc}") from None


def _delimiter(path: Path) -> str:
    """The delimiter of a CSV file: the one of ``,;\t|`` that occurs most in its header line."""
    opener = __import__("gzip").open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        header = handle.readline()
    return max(",;\t|", key=header.count) if any(c in header for c in ",;\t|") else ","
