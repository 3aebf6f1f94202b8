"""Load the bundled data sets as pandas DataFrames.

The Parquet files ship inside the package (next to this module), so loading needs no network and no other
folder. See each data set folder's README.md for citation, license and column notes.

Example:
    >>> df = load("bank")
    >>> df.shape
    (4521, 17)
    >>> sorted(DATASETS)
    ['bank', 'bank_full', 'default_credit']
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from vsplit.errors import ConfigError, DataError

_HERE = Path(__file__).parent

#: Data set name -> Parquet file below this package.
DATASETS: dict[str, str] = {
    "bank_full": "bank_marketing/bank_full.parquet",
    "bank": "bank_marketing/bank.parquet",
    "default_credit": "default_credit/default_credit.parquet",
}


def load(name: str) -> pd.DataFrame:
    """Return a fresh copy of a bundled data set, with its raw columns and values.

    Args:
        name: ``"bank_full"`` (UCI Bank Marketing, 45,211 calls), ``"bank"`` (its 4,521-row sample) or
            ``"default_credit"`` (UCI Default of Credit Card Clients, 30,000 clients).

    Returns:
        The table in source row order: text columns as strings, numbers as int64.

    Raises:
        ConfigError: ``name`` is not a bundled data set.
        DataError: the Parquet file is missing from the installation.

    Example:
        >>> load("default_credit")["default"].mean().round(4)
        np.float64(0.2212)
    """
    if name not in DATASETS:
        raise ConfigError(f"unknown data set {name!r}; choose one of {', '.join(sorted(DATASETS))}")
    path = _HERE / DATASETS[name]
    if not path.is_file():
        raise DataError(
            f"data set {name!r}: {path} is missing; reinstall vsplit, or rebuild it with "
            "`python -m vsplit.datasets.build --source <raw CSV folder>`"
        )
    return pd.read_parquet(path)
