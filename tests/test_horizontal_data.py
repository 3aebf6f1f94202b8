"""Horizontal splits: every row at exactly one client, seeded deals, measured skew, MNIST-1D made locally."""

from __future__ import annotations

import itertools
import random
import socket

import numpy as np
import pandas as pd
import pytest

from vsplit.datasets import horizontal, load
from vsplit.datasets.horizontal import ID_COLUMN, horizontal_split
from vsplit.errors import ConfigError

CASES = [
    ("default_credit", 3, "iid", None),
    ("default_credit", 5, "non_iid", "EDUCATION"),
    ("default_credit", 4, "non_iid", "LIMIT_BAL"),
    ("digits", 4, "iid", None),
    ("digits", 4, "non_iid", None),
]


def assert_dealt_once(split, source_ids):
    """No ID and no row in two clients' tables, train and test disjoint, the union the whole source."""
    seen: list[str] = []
    for tables in (split.train, split.test):
        for table in tables.values():
            assert list(table.columns) == [ID_COLUMN, *split.features, split.label]
            seen += list(table[ID_COLUMN])
    assert len(seen) == len(set(seen)), "a row is held by two clients"
    assert set(seen) == source_ids


def credit_ids():
    return {f"c{i:05d}" for i in range(1, 30_001)}


@pytest.mark.parametrize(("name", "clients", "scheme", "by"), CASES)
def test_every_row_is_held_by_exactly_one_client(name, clients, scheme, by):
    split = horizontal_split(name, clients=clients, scheme=scheme, by=by, seed=1)
    assert split.clients == tuple(f"{'bank' if name == 'default_credit' else 'client'}_{i + 1}" for i in range(clients))
    ids = credit_ids() if name == "default_credit" else {f"d{i:04d}" for i in range(1797)}
    assert_dealt_once(split, ids)
    sizes = [len(t) for t in split.train.values()]
    assert max(sizes) - min(sizes) <= 1
    if name == "default_credit":  # the rows themselves, not only their IDs, are the source's
        union = pd.concat([split.pooled("train"), split.pooled("test")]).sort_values(ID_COLUMN)
        source = load("default_credit").drop(columns="ID")
        for column in split.categorical:
            union[column] = union[column].astype("int64")
        pd.testing.assert_frame_equal(union.drop(columns=ID_COLUMN).reset_index(drop=True), source)


def test_materialised_tables_hold_each_clients_rows_only(tmp_path):
    split = horizontal_split("default_credit", clients=3, scheme="non_iid", seed=2)
    paths = split.materialise(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank_1", "bank_2", "bank_3"]
    owner: dict[str, str] = {}
    for client, files in paths.items():
        for part, path in files.items():
            table = pd.read_parquet(path)
            pd.testing.assert_frame_equal(table, (split.train if part == "train" else split.test)[client])
            for row_id in table[ID_COLUMN]:
                assert owner.setdefault(row_id, client) == client, f"{row_id} at {owner[row_id]} and {client}"
    assert set(owner) == credit_ids()


def test_the_same_seed_deals_the_same_rows_and_another_seed_others():
    a = horizontal_split("default_credit", clients=3, seed=4)
    b = horizontal_split("default_credit", clients=3, seed=4)
    c = horizontal_split("default_credit", clients=3, seed=5)
    for client in a.clients:
        pd.testing.assert_frame_equal(a.train[client], b.train[client])
    assert set(a.train["bank_1"][ID_COLUMN]) != set(c.train["bank_1"][ID_COLUMN])


def test_non_iid_banks_are_skewed_and_iid_banks_are_not():
    iid = horizontal_split("default_credit", clients=5, scheme="iid", by="EDUCATION", seed=0).skew()
    non = horizontal_split("default_credit", clients=5, scheme="non_iid", by="EDUCATION", seed=0).skew()
    assert iid["by_tvd"].max() < 0.03 and non["by_tvd"].min() > 0.3
    assert iid["positive_rate"].max() - iid["positive_rate"].min() < 0.03
    assert list(non.columns) == ["rows", "test_rows", "positive_rate", "label_tvd", "by_tvd"]
    assert non["rows"].sum() == 24_000 and non["test_rows"].sum() == 6_000


def test_credit_limit_bands_are_contiguous_and_default_rates_differ():
    split = horizontal_split("default_credit", clients=4, scheme="non_iid", by="LIMIT_BAL", seed=0)
    limits = [split.train[c]["LIMIT_BAL"] for c in split.clients]
    assert all(a.max() <= b.min() for a, b in itertools.pairwise(limits))
    rates = split.skew()["positive_rate"]
    assert rates.iloc[0] > rates.iloc[-1] + 0.1  # low limits default more often


def test_label_skew_for_digits():
    split = horizontal_split("digits", clients=4, scheme="non_iid", seed=0)
    classes = [set(split.train[c]["digit"]) for c in split.clients]
    assert all(len(k) <= 4 for k in classes)
    assert split.skew()["label_tvd"].min() > 0.5


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"name": "mnist"}, "unknown horizontal data set"),
        ({"name": "digits", "scheme": "dirichlet"}, "unknown scheme"),
        ({"name": "digits", "clients": 1}, "clients must be"),
        ({"name": "default_credit", "by": "INCOME"}, "not a column"),
        ({"name": "default_credit", "seed": -1}, "seed must be"),
    ],
)
def test_bad_arguments_are_refused(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        horizontal_split(**kwargs)


def test_mnist1d_is_generated_locally_seeded_and_split_across_four_clients(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("MNIST-1D tried to reach the network")

    import requests

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(requests, "get", no_network)
    monkeypatch.setattr(requests.Session, "request", no_network)
    import mnist1d.data

    monkeypatch.setattr(mnist1d.data, "get_dataset", no_network)
    horizontal.mnist1d_arrays.cache_clear()
    np.random.seed(123)
    random.seed(123)
    before = (np.random.random(), random.random())
    np.random.seed(123)
    random.seed(123)
    split = horizontal_split("mnist1d", clients=4, seed=0)
    assert (np.random.random(), random.random()) == before  # the generator's global seeding is undone
    assert len(split.pooled("train")) == 4000 and len(split.pooled("test")) == 1000
    assert len(split.features) == 40 and split.label == "digit"
    assert np.bincount(split.pooled("train")["digit"]).min() >= 350
    assert_dealt_once(split, {f"m{i:04d}" for i in range(5000)})
    first = horizontal.mnist1d_arrays()[0].copy()
    horizontal.mnist1d_arrays.cache_clear()
    assert np.array_equal(horizontal.mnist1d_arrays()[0], first)  # seeded: generated again, the same signals
