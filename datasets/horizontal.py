"""Horizontal splits: many clients (banks) with the same columns about different customers.

Theory of operation. A source table is split into train and test rows first (``default_credit`` and ``digits``:
stratified 80/20 by ``seed``; ``mnist1d``: the generator's own 4,000 / 1,000 split, as MNIST-1D's published
results use), then each split is dealt to the clients on its own with the same scheme, so every client has train
and test rows from its own distribution and no row is held by two clients:

- ``"iid"``: a seeded random permutation cut into ``clients`` nearly equal parts;
- ``"non_iid"``: the rows sorted by the column ``by`` (ties in a seeded random order) and cut into ``clients``
  contiguous blocks of nearly equal size: with ``by="EDUCATION"`` the first bank serves mostly graduate-school
  customers, with ``by="LIMIT_BAL"`` each bank serves one credit-limit band, with the label (``digits``,
  ``mnist1d``) each client sees two or three classes.

:meth:`HorizontalSplit.skew` reports how far each client is from the pooled data: rows, positive rate (binary),
and the total variation distance (TVD, half the L1 distance of two distributions, 0 = identical, 1 = disjoint) of
the label's and of the ``by`` column's distribution from the pooled train rows' (a numeric ``by`` with many values
is binned at the pooled deciles). :meth:`HorizontalSplit.materialise` writes each client's rows to its own Parquet
files. MNIST-1D is generated locally by the ``mnist1d`` package's ``make_dataset`` (a few seconds, cached per
process); its downloading loader is never called.

API:
    ``horizontal_split(name, *, clients=3, scheme="iid", by=None, seed=0) -> HorizontalSplit``, ``HORIZONTAL``.

Example:
    >>> s = horizontal_split("default_credit", clients=3, scheme="non_iid", by="EDUCATION", seed=0)
    >>> s.clients, [len(s.train[c]) for c in s.clients]
    (('bank_1', 'bank_2', 'bank_3'), [8000, 8000, 8000])
    >>> s.skew().loc["bank_1", ["positive_rate", "by_tvd"]].round(3).tolist()
    [0.192, 0.646]
"""

from __future__ import annotations

import functools
import numbers
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from vsplit.errors import ConfigError

from .loaders import load

#: The data sets a horizontal split can be made of.
HORIZONTAL: tuple[str, ...] = ("default_credit", "digits", "mnist1d")
SCHEMES: tuple[str, ...] = ("iid", "non_iid")
ID_COLUMN = "customer_id"
_BINS = 10  # a numeric ``by`` column with more distinct values is binned at the pooled deciles


@dataclass(frozen=True, eq=False)
class HorizontalSplit:
    """Per-client train and test tables with the same columns, plus what they mean.

    Attributes:
        name: The source, one of :data:`HORIZONTAL`.
        description: Where the rows come from.
        scheme: ``"iid"`` or ``"non_iid"``.
        by: The column a non-IID split sorts by; for IID, only the column :meth:`skew` reports on.
        seed: The seed of the train/test split and of the deal.
        label: The label column.
        positive_label: The positive class (``1``) of a binary label; ``None`` for multiclass.
        features: The feature columns, the same at every client.
        categorical: The text feature columns.
        train: Client name -> its training rows (``customer_id``, features, label).
        test: Client name -> its test rows.
    """

    name: str
    description: str
    scheme: str
    by: str
    seed: int
    label: str
    positive_label: int | None
    features: tuple[str, ...]
    categorical: tuple[str, ...]
    train: dict[str, pd.DataFrame]
    test: dict[str, pd.DataFrame]

    @property
    def clients(self) -> tuple[str, ...]:
        """The client names, in order."""
        return tuple(self.train)

    def pooled(self, split: str) -> pd.DataFrame:
        """All clients' rows of ``split`` (``"train"`` or ``"test"``) in one table: for the pooled baseline and
        pooled evaluation only (no deployment can build it)."""
        if split not in ("train", "test"):
            raise ConfigError(f"split must be 'train' or 'test', got {split!r}")
        tables = self.train if split == "train" else self.test
        return pd.concat(list(tables.values()), ignore_index=True)

    def features_labels(self, client: str, split: str = "train") -> tuple[pd.DataFrame, pd.Series]:
        """One client's feature table and label column."""
        tables = self.train if split == "train" else self.test
        if client not in tables:
            raise ConfigError(f"unknown client {client!r}; choose one of {', '.join(tables)}")
        table = tables[client]
        return table[list(self.features)], table[self.label]

    def skew(self) -> pd.DataFrame:
        """Per client: ``rows``, ``test_rows``, ``positive_rate`` (binary labels), ``label_tvd`` and ``by_tvd`` (the
        TVD of the label's and of the ``by`` column's distribution from the pooled train rows')."""
        pooled = self.pooled("train")
        label_bins = _bins(pooled[self.label])
        by = self.by
        by_bins = _bins(pooled[by])
        rows = []
        for client, table in self.train.items():
            row = {"rows": len(table), "test_rows": len(self.test[client])}
            if self.positive_label is not None:
                row["positive_rate"] = float((table[self.label] == self.positive_label).mean())
            row["label_tvd"] = _tvd(table[self.label], pooled[self.label], label_bins)
            row["by_tvd"] = _tvd(table[by], pooled[by], by_bins)
            rows.append(row)
        return pd.DataFrame(rows, index=pd.Index(self.clients, name="client"))

    def materialise(self, folder: str | Path) -> dict[str, dict[str, Path]]:
        """Write ``<folder>/<client>/train.parquet`` and ``test.parquet``: each client's rows only in its own files.

        Returns:
            Client -> {"train": path, "test": path}.
        """
        out: dict[str, dict[str, Path]] = {}
        for client in self.clients:
            where = Path(folder) / client
            where.mkdir(parents=True, exist_ok=True)
            out[client] = {}
            for split, tables in (("train", self.train), ("test", self.test)):
                path = where / f"{split}.parquet"
                tables[client].to_parquet(path, index=False)
                out[client][split] = path
        return out


def horizontal_split(
    name: str, *, clients: int = 3, scheme: str = "iid", by: str | None = None, seed: int = 0
) -> HorizontalSplit:
    """Deal a data set's rows to ``clients`` clients (see the module docstring).

    Args:
        name: One of :data:`HORIZONTAL`.
        clients: How many clients, 2 or more (the presets use 3..5 banks, 4 clients for digits and MNIST-1D).
        scheme: ``"iid"`` or ``"non_iid"``.
        by: The column a non-IID split sorts by; default ``"EDUCATION"`` for ``default_credit``, the label for the
            others. With ``"iid"`` it only names the column :meth:`HorizontalSplit.skew` reports on.
        seed: Non-negative integer below 2**32.

    Raises:
        ConfigError: unknown name, scheme or column, or a bad count or seed.
    """
    if name not in HORIZONTAL:
        raise ConfigError(f"unknown horizontal data set {name!r}; choose one of {', '.join(HORIZONTAL)}")
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**32:
        raise ConfigError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    if isinstance(clients, bool) or not isinstance(clients, numbers.Integral) or clients < 2:
        raise ConfigError(f"clients must be an integer >= 2, got {clients!r}")
    source = _SOURCES[name](int(seed))
    if by is None:
        by = source.default_by
    if by not in source.train.columns or by == ID_COLUMN:
        raise ConfigError(f"by={by!r} is not a column of {name}; use one of {', '.join(source.features)} "
                          f"or {source.label!r}")
    prefix = "bank" if name == "default_credit" else "client"
    names = [f"{prefix}_{i + 1}" for i in range(int(clients))]
    rng = np.random.default_rng([int(seed), 7])
    train = _deal(source.train, names, scheme=scheme, by=by, rng=rng)
    test = _deal(source.test, names, scheme=scheme, by=by, rng=rng)
    return HorizontalSplit(
        name=name, description=source.description, scheme=scheme, by=by, seed=int(seed), label=source.label,
        positive_label=source.positive_label, features=source.features, categorical=source.categorical,
        train=train, test=test,
    )


def _deal(table: pd.DataFrame, names: list[str], *, scheme: str, by: str | None, rng: np.random.Generator
          ) -> dict[str, pd.DataFrame]:
    """Cut ``table`` into one part per client: a random permutation (IID) or blocks sorted by ``by``."""
    if len(table) < len(names):
        raise ConfigError(f"{len(table)} rows cannot be dealt to {len(names)} clients")
    order = rng.permutation(len(table))
    if scheme == "non_iid":
        keys = table[by].to_numpy()[order]
        order = order[np.argsort(keys, kind="stable")]
    parts = np.array_split(order, len(names))
    return {name: table.iloc[np.sort(part)].reset_index(drop=True) for name, part in zip(names, parts, strict=True)}


def _bins(values: pd.Series) -> np.ndarray | None:
    """Bin edges (the pooled deciles) for a numeric column with many values; ``None``: use the values."""
    if pd.api.types.is_numeric_dtype(values) and values.nunique() > 2 * _BINS:
        return np.unique(np.quantile(values.to_numpy(dtype=np.float64), np.linspace(0, 1, _BINS + 1)[1:-1]))
    return None


def _tvd(part: pd.Series, pooled: pd.Series, edges: np.ndarray | None) -> float:
    """Total variation distance between the distributions of ``part`` and ``pooled`` (binned at ``edges``)."""
    if edges is not None:
        part = pd.Series(np.searchsorted(edges, part.to_numpy(dtype=np.float64), side="right"))
        pooled = pd.Series(np.searchsorted(edges, pooled.to_numpy(dtype=np.float64), side="right"))
    p = part.value_counts(normalize=True)
    q = pooled.value_counts(normalize=True)
    return float(0.5 * p.sub(q, fill_value=0.0).abs().sum())


@dataclass(frozen=True)
class _Source:
    description: str
    label: str
    positive_label: int | None
    features: tuple[str, ...]
    categorical: tuple[str, ...]
    default_by: str
    train: pd.DataFrame
    test: pd.DataFrame


_CREDIT = (
    "UCI Default of Credit Card Clients (30,000): will the client default next month? Every bank holds all 23 "
    "feature columns (LIMIT_BAL, SEX, EDUCATION, MARRIAGE, AGE, PAY_0, PAY_2..6, BILL_AMT1..6, PAY_AMT1..6; SEX, "
    "EDUCATION, MARRIAGE as code strings) about its own customers. Stratified 80/20 split by the seed."
)
_DIGITS = (
    "scikit-learn's bundled copy of the UCI handwritten digits (1,797 8x8 images, pixels px00..px63, label "
    "digit). Stratified 80/20 split by the seed; nothing is downloaded."
)
_MNIST1D = (
    "MNIST-1D (Greydanus and Kobak, 2024): 5,000 one-dimensional signals of length 40 (x00..x39, label digit), "
    "generated locally by mnist1d.data.make_dataset with the package's default arguments (generator seed 42), "
    "its own 4,000 / 1,000 train/test split, as in its published results; the downloading loader is never called."
)


def _credit(seed: int) -> _Source:
    table = load("default_credit")
    table.insert(0, ID_COLUMN, [f"c{i:05d}" for i in table.pop("ID")])
    categorical = ("SEX", "EDUCATION", "MARRIAGE")
    for column in categorical:
        table[column] = table[column].astype(str)
    features = tuple(c for c in table.columns if c not in (ID_COLUMN, "default"))
    train, test = train_test_split(table, test_size=0.2, stratify=table["default"], random_state=seed)
    return _Source(_CREDIT, "default", 1, features, categorical, "EDUCATION", train, test)


def _digits(seed: int) -> _Source:
    from sklearn.datasets import load_digits  # bundled with scikit-learn: nothing is downloaded

    images = load_digits()
    features = tuple(f"px{i:02d}" for i in range(64))
    table = pd.DataFrame(images.data.astype(np.float32), columns=list(features))
    table.insert(0, ID_COLUMN, [f"d{i:04d}" for i in range(len(table))])
    table["digit"] = images.target.astype(np.int64)
    train, test = train_test_split(table, test_size=0.2, stratify=table["digit"], random_state=seed)
    return _Source(_DIGITS, "digit", None, features, (), "digit", train, test)


def _mnist1d(seed: int) -> _Source:
    x, y, x_test, y_test = mnist1d_arrays()
    features = tuple(f"x{i:02d}" for i in range(x.shape[1]))

    def table(xs: np.ndarray, ys: np.ndarray, start: int) -> pd.DataFrame:
        frame = pd.DataFrame(xs.astype(np.float32), columns=list(features))
        frame.insert(0, ID_COLUMN, [f"m{start + i:04d}" for i in range(len(frame))])
        frame["digit"] = ys.astype(np.int64)
        return frame

    return _Source(_MNIST1D, "digit", None, features, (), "digit", table(x, y, 0), table(x_test, y_test, len(x)))


@functools.lru_cache(maxsize=1)
def mnist1d_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """MNIST-1D's train and test arrays ``(x, y, x_test, y_test)``, generated locally once per process.

    Calls ``mnist1d.data.make_dataset(get_dataset_args())`` only: never ``get_dataset``, which downloads a pickle
    (and unpickles it). ``make_dataset`` seeds NumPy's and Python's global generators; their states are restored
    afterwards so callers' randomness is untouched.
    """
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError:
        raise ConfigError("the mnist1d preset needs the mnist1d package: pip install 'vsplit[horizontal]'") from None
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(get_dataset_args())
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)
    arrays = (data["x"], data["y"], data["x_test"], data["y_test"])
    for array in arrays:
        array.setflags(write=False)
    return arrays  # type: ignore[return-value]


_SOURCES = {"default_credit": _credit, "digits": _digits, "mnist1d": _mnist1d}
