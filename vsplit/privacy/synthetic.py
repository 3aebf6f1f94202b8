"""A small imbalanced two-party data set for privacy tests, doctests and demonstrations.

The bank holds ``age``, ``segment`` and the label ``y`` (about 10 % positives); the partner holds six numeric
columns ``x1`` … ``x6`` and a categorical ``region``. The label depends on the partner only through the sum
``x1 + x2 + x3 + x4``: a partner embedding that carried only what the label needs would let a label party recover
each of those four columns with an R² of about 0.25 and ``x5``, ``x6`` and ``region`` not at all, while an embedding
that keeps everything lets it recover every column. That gap is what the embedding defenses are measured on.

Example:
    >>> views = make_imbalanced_views(1000, seed=0)
    >>> sorted(views), list(views["partner"].columns)
    (['bank', 'partner'], ['customer_id', 'x1', 'x2', 'x3', 'x4', 'x5', 'x6', 'region'])
    >>> bool(0.05 < (views["bank"]["y"] == 1).mean() < 0.15)
    True
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def make_imbalanced_views(n: int = 3000, *, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Bank and partner tables of ``n`` shared customers (partner rows shuffled), label ``y`` in {0, 1}.

    Args:
        n: number of customers.
        seed: seed of every random choice.
    """
    rng = np.random.default_rng(seed)
    ids = np.array([f"S{v:08d}" for v in rng.choice(10**8, size=n, replace=False)], dtype=object)
    age = rng.integers(20, 75, size=n)
    segment = rng.choice(["retail", "private", "business"], size=n, p=[0.6, 0.25, 0.15])
    x = rng.normal(size=(n, 6))
    region = rng.choice(["north", "south", "east"], size=n)
    logit = 1.1 * x[:, :4].sum(axis=1) + 0.03 * (age - 47) + 0.8 * (segment == "private") - 3.6
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    bank = pd.DataFrame({"customer_id": ids, "age": age, "segment": segment, "y": y})
    partner = pd.DataFrame({"customer_id": ids, **{f"x{j + 1}": x[:, j] for j in range(6)}, "region": region})
    return {"bank": bank, "partner": partner.sample(frac=1.0, random_state=seed).reset_index(drop=True)}


def split_views(
    views: dict[str, pd.DataFrame], *, test_fraction: float = 0.25, seed: int = 0
) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Split every party's table into train and test by customer (the same customers on every side).

    Example:
        >>> train, test = split_views(make_imbalanced_views(400), test_fraction=0.25)
        >>> len(train["bank"]), len(test["partner"])
        (300, 100)
    """
    ids = views["bank"]["customer_id"].to_numpy()
    rng = np.random.default_rng(seed)
    test_ids = set(rng.choice(ids, size=round(test_fraction * len(ids)), replace=False).tolist())
    train, test = {}, {}
    for party, table in views.items():
        is_test = table["customer_id"].isin(test_ids).to_numpy()
        train[party] = table[~is_test].reset_index(drop=True)
        test[party] = table[is_test].reset_index(drop=True)
    return train, test
