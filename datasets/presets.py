"""Ready-made splits of the bundled data sets: a "bank" that holds the label and a "partner" (``digits``: one party).

Each two-party preset splits the source table into train and test rows first, then partitions each split on its own (see
:func:`vsplit.datasets.partition.partition`). So train and test hold different customers, with disjoint IDs,
and the partner knows only part of the bank's test customers as well: PSI has to run on both.

Example:
    >>> PRESETS
    ('bank_marketing', 'bank_marketing_no_duration', 'secretflow_bank', 'default_credit', 'digits')

``digits`` is scikit-learn's bundled copy of the UCI handwritten digits (8x8 images, 10 classes) held by one
party, ``"client"``: for vanilla and U-shaped splits, where the other side (a server) holds no rows at all.
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from vsplit.errors import ConfigError

from .loaders import load
from .partition import partition

LABEL_PARTY, PARTNER, ID_COLUMN = "bank", "partner", "customer_id"


@dataclass(frozen=True, eq=False)
class Preset:
    """A vertical split ready for training: per-party train and test tables plus what they mean.

    Attributes:
        name: The preset's name, one of :data:`PRESETS`.
        description: Where the split comes from and what to watch out for.
        label_party: The party holding the label (``"bank"``; ``"client"`` for ``digits``).
        label: The label column, found only in the label party's tables.
        positive_label: The label value of the positive class (``"yes"`` or ``1``); ``None`` for a multiclass
            label (``digits``).
        id_column: The customer ID column, first in every table.
        train: Party name -> that party's training table.
        test: Party name -> that party's test table.
        categorical: Party name -> its categorical feature columns (text dtype; the ID and label excluded).
    """

    name: str
    description: str
    label_party: str
    label: str
    positive_label: str | int | None
    id_column: str
    train: dict[str, pd.DataFrame]
    test: dict[str, pd.DataFrame]
    categorical: dict[str, list[str]]

    @property
    def parties(self) -> tuple[str, ...]:
        """The party names, label party first."""
        return tuple(self.train)

    def pooled(self, split: str) -> pd.DataFrame:
        """Join all parties' tables of one split on the ID: for the centralized baseline only.

        No real deployment can build this table; it exists to train the centralized model that split
        training is compared with. It holds the customers every party knows (inner join), in the label
        party's row order: the ID, the label party's columns, then each other party's columns.

        Args:
            split: ``"train"`` or ``"test"``.

        Example:
            >>> p = preset("secretflow_bank")
            >>> p.pooled("test").shape
            (905, 18)
        """
        if split not in ("train", "test"):
            raise ConfigError(f"split must be 'train' or 'test', got {split!r}")
        tables = self.train if split == "train" else self.test
        pooled = tables[self.label_party]
        for party, table in tables.items():
            if party != self.label_party:
                pooled = pooled.merge(table, on=self.id_column, how="inner", validate="one_to_one")
        return pooled.reset_index(drop=True)


@dataclass(frozen=True)
class _Recipe:
    source: str
    description: str
    label: str
    positive: str | int
    bank: tuple[str, ...]  # the label party's columns, label last
    partner: tuple[str, ...]
    overlap: float = 0.85
    extra: float = 0.10
    split_seed: int | None = None  # fixed (unstratified) split; None: stratified split by the preset's seed
    as_text: tuple[str, ...] = ()  # integer codes to turn into strings (categorical)


_BANK = ("age", "job", "marital", "education", "default", "balance", "housing", "loan", "y")
_CALLS = ("contact", "day", "month", "duration", "campaign", "pdays", "previous", "poutcome")
_BM = (
    "UCI Bank Marketing (bank_full, 45,211 calls): will the client subscribe a term deposit (y)? "
    "The bank holds the client's profile, the partner the campaign's call records. "
    "Stratified 80/20 split by y; the partner knows 85 % of the bank's customers plus 10 % others."
)
_RECIPES: dict[str, _Recipe] = {
    "bank_marketing": _Recipe(
        "bank_full", _BM + " Includes duration, which leaks the label: benchmark use only.", "y", "yes",
        _BANK, _CALLS,
    ),
    "bank_marketing_no_duration": _Recipe(
        "bank_full",
        _BM + " Without duration: the call's length is unknown before the call and y is known after it, so "
        "UCI's notes say to drop it for a realistic predictive model.",
        "y", "yes", _BANK, tuple(c for c in _CALLS if c != "duration"),
    ),
    "secretflow_bank": _Recipe(
        "bank",
        "SecretFlow's split-learning bank-marketing tutorial: the 4,521-row bank sample, bank = age, job, "
        "marital, education and y, partner = the other 12 columns (duration included), every customer known "
        "to both, train_test_split(train_size=0.8, random_state=1234) unstratified, as their tutorial does.",
        "y", "yes", ("age", "job", "marital", "education", "y"),
        ("default", "balance", "housing", "loan", *_CALLS),
        overlap=1.0, extra=0.0, split_seed=1234,
    ),
    "default_credit": _Recipe(
        "default_credit",
        "UCI Default of Credit Card Clients (30,000): will the client default next month? FATE's guest/host "
        "split: the bank (guest) holds the label, PAY_6 and the bill and payment amounts, the partner (host) "
        "the credit limit, demographics and PAY_0..PAY_5. SEX, EDUCATION, MARRIAGE are codes, stored as "
        "strings. Stratified 80/20 split; the partner knows 85 % of the bank's customers plus 10 % others.",
        "default", 1,
        ("PAY_6", *(f"BILL_AMT{i}" for i in range(1, 7)), *(f"PAY_AMT{i}" for i in range(1, 7)), "default"),
        ("LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE", "PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5"),
        as_text=("SEX", "EDUCATION", "MARRIAGE"),
    ),
}

DIGITS_PARTY, DIGITS_LABEL = "client", "digit"
_DIGITS = (
    "scikit-learn's bundled copy of the test set of UCI Optical Recognition of Handwritten Digits (1,797 8x8 "
    "images, 10 classes, pixel counts 0..16): which digit is it? One party, the client, holds the pixels "
    "px00..px63 (row-major) and the label; customer IDs d0000.. follow the image order. Stratified 80/20 split "
    "by the seed. For vanilla and U-shaped splits (a server holds no rows); scale with scaling='standard'."
)

#: The preset names, in the order they are documented.
PRESETS: tuple[str, ...] = (*_RECIPES, "digits")


def preset(name: str, *, seed: int = 0) -> Preset:
    """Build a preset's per-party train and test tables.

    Args:
        name: One of :data:`PRESETS`.
        seed: Non-negative integer below 2**32 for the customer IDs, the partner's sample and row orders, and
            (except for ``secretflow_bank``, whose split is fixed) the train/test split.

    Raises:
        ConfigError: unknown name or bad seed.

    Example:
        >>> p = preset("default_credit", seed=3)
        >>> p.parties, p.label, p.categorical["partner"]
        (('bank', 'partner'), 'default', ['SEX', 'EDUCATION', 'MARRIAGE'])
    """
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**32:
        raise ConfigError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    if name == "digits":
        return _digits(int(seed))
    recipe = _RECIPES[name]
    source = load(recipe.source)
    for column in recipe.as_text:
        source[column] = source[column].astype(str)
    if recipe.split_seed is None:
        train, test = train_test_split(
            source, test_size=0.2, stratify=source[recipe.label], random_state=int(seed)
        )
    else:
        train, test = train_test_split(source, train_size=0.8, random_state=recipe.split_seed)

    split = functools.partial(
        partition, columns={LABEL_PARTY: list(recipe.bank), PARTNER: list(recipe.partner)},
        label_party=LABEL_PARTY, label=recipe.label, overlap=recipe.overlap, extra=recipe.extra,
        id_column=ID_COLUMN,
    )
    train_seed, test_seed = (int(s) for s in np.random.SeedSequence(int(seed)).generate_state(2))
    train_tables = split(train, seed=train_seed)
    used = set().union(*(table[ID_COLUMN] for table in train_tables.values()))
    test_tables = split(test, seed=test_seed, reserved_ids=used)
    return Preset(
        name=name,
        description=recipe.description,
        label_party=LABEL_PARTY,
        label=recipe.label,
        positive_label=recipe.positive,
        id_column=ID_COLUMN,
        train=train_tables,
        test=test_tables,
        categorical={party: _categorical(table, skip=(ID_COLUMN, recipe.label))
                     for party, table in train_tables.items()},
    )


def _digits(seed: int) -> Preset:
    """The ``digits`` preset: one party, the client, with pixels and label; stratified 80/20 split by ``seed``."""
    from sklearn.datasets import load_digits  # bundled with scikit-learn: nothing is downloaded

    images = load_digits()
    table = pd.DataFrame(images.data.astype(np.float32), columns=[f"px{i:02d}" for i in range(64)])
    table.insert(0, ID_COLUMN, [f"d{i:04d}" for i in range(len(table))])
    table[DIGITS_LABEL] = images.target.astype(np.int64)
    train, test = train_test_split(table, test_size=0.2, stratify=table[DIGITS_LABEL], random_state=seed)
    return Preset(
        name="digits",
        description=_DIGITS,
        label_party=DIGITS_PARTY,
        label=DIGITS_LABEL,
        positive_label=None,
        id_column=ID_COLUMN,
        train={DIGITS_PARTY: train.reset_index(drop=True)},
        test={DIGITS_PARTY: test.reset_index(drop=True)},
        categorical={DIGITS_PARTY: []},
    )


def _categorical(table: pd.DataFrame, *, skip: tuple[str, ...]) -> list[str]:
    """Return the text (object, string or category dtype) columns of ``table``, except those in ``skip``."""
    def is_text(values: pd.Series) -> bool:
        return (
            pd.api.types.is_string_dtype(values)
            or isinstance(values.dtype, pd.CategoricalDtype)
            or values.dtype == object
        )

    return [str(column) for column in table.columns if column not in skip and is_text(table[column])]
