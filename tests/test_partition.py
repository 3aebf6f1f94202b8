"""The vertical partitioner: each party's table looks like what a real organization would hold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsplit import datasets
from vsplit.errors import ConfigError, DataError

COLUMNS = {"bank": ["account", "age", "job", "y"], "shop": ["income", "city"]}


def customers(n: int = 200, *, seed: int = 0) -> pd.DataFrame:
    """A small source table; ``account`` is unique, so a row can be traced back to its customer."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "account": np.arange(1000, 1000 + n),
            "age": rng.integers(18, 90, n),
            "job": rng.choice(["admin", "retired", "student"], n),
            "y": rng.choice(["no", "yes"], n),
            "income": rng.normal(3000, 500, n).round(2),
            "city": rng.choice(["Lisbon", "Porto", "Faro", "Braga"], n),
        }
    )


def split(df: pd.DataFrame | None = None, **kwargs) -> dict[str, pd.DataFrame]:
    options = {"columns": COLUMNS, "label_party": "bank", "label": "y", "seed": 1} | kwargs
    return datasets.partition(customers() if df is None else df, **options)


def ids(table: pd.DataFrame) -> set[str]:
    return set(table["customer_id"])


def check_invariants(
    df: pd.DataFrame, tables: dict[str, pd.DataFrame], *, overlap: float, extra: float
) -> None:
    """What must hold for any source table, overlap, extra and seed."""
    n = len(df)
    bank, shop = tables["bank"], tables["shop"]
    assert list(tables) == ["bank", "shop"]
    for party, table in tables.items():
        assert list(table.columns) == ["customer_id", *COLUMNS[party]]
        assert table["customer_id"].map(lambda v: isinstance(v, str) and len(v) == 10 and v.isdigit()).all()
        assert table["customer_id"].is_unique
        assert table.index.equals(pd.RangeIndex(len(table)))
    assert len(bank) == n
    assert sorted(bank["account"]) == sorted(df["account"])  # every customer exactly once
    shared = ids(bank) & ids(shop)
    assert len(shared) == int(np.floor(overlap * n + 0.5))
    assert len(ids(shop) - ids(bank)) == int(np.floor(extra * n + 0.5))
    # Every row of the partner, shared or extra, is a real row of the partner's columns.
    real_rows = set(df[COLUMNS["shop"]].itertuples(index=False, name=None))
    assert set(shop[COLUMNS["shop"]].itertuples(index=False, name=None)) <= real_rows


def test_parties_hold_disjoint_columns_that_together_are_the_requested_ones():
    tables = split()
    held = [c for table in tables.values() for c in table.columns if c != "customer_id"]
    assert sorted(held) == sorted(c for cols in COLUMNS.values() for c in cols)
    assert len(held) == len(set(held))
    assert [table.columns[0] for table in tables.values()] == ["customer_id", "customer_id"]


def test_label_is_only_on_the_label_party():
    tables = split()
    assert "y" in tables["bank"].columns
    assert "y" not in tables["shop"].columns


def test_ids_are_unique_ten_digit_strings_not_row_numbers():
    tables = split()
    all_ids = pd.concat([table["customer_id"] for table in tables.values()])
    assert pd.api.types.is_string_dtype(all_ids)
    assert all_ids.str.fullmatch(r"[1-9]\d{9}").all()
    assert ids(tables["bank"]).isdisjoint(str(i) for i in range(10_000))


def test_partner_knows_the_overlap_share_plus_extra_people_the_bank_does_not_know():
    tables = split(overlap=0.85, extra=0.10)
    shared = ids(tables["bank"]) & ids(tables["shop"])
    extras = ids(tables["shop"]) - ids(tables["bank"])
    assert len(shared) == 170
    assert len(extras) == 20
    assert len(tables["shop"]) == 190


def test_shared_customers_keep_their_own_values_at_the_partner():
    df = customers()
    tables = split(df)
    joined = tables["bank"].merge(tables["shop"], on="customer_id")
    expected = df.set_index("account").loc[joined["account"], ["income", "city"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(joined[["income", "city"]], expected)


def test_extra_people_copy_whole_rows_of_real_customers():
    df = customers()
    tables = split(df, extra=0.5)
    extras = tables["shop"][~tables["shop"]["customer_id"].isin(ids(tables["bank"]))]
    assert len(extras) == 100
    real_rows = set(df[["income", "city"]].itertuples(index=False, name=None))
    assert set(extras[["income", "city"]].itertuples(index=False, name=None)) <= real_rows


def test_each_party_keeps_its_own_row_order():
    tables = split(overlap=1.0, extra=0.0)
    bank_order = tables["bank"]["customer_id"].tolist()
    shop_order = tables["shop"]["customer_id"].tolist()
    assert sorted(bank_order) == sorted(shop_order)
    assert bank_order != shop_order
    assert tables["bank"]["account"].tolist() != sorted(tables["bank"]["account"])  # not the source order


def test_same_seed_gives_identical_tables_and_another_seed_does_not():
    first, again, other = split(seed=5), split(seed=5), split(seed=6)
    for party in COLUMNS:
        pd.testing.assert_frame_equal(first[party], again[party])
        assert ids(first[party]).isdisjoint(ids(other[party]))
    assert first["bank"]["account"].tolist() != other["bank"]["account"].tolist()


def test_result_does_not_depend_on_the_order_of_the_parties():
    forward = split(columns=COLUMNS)
    backward = split(columns=dict(reversed(COLUMNS.items())))
    assert list(backward) == ["shop", "bank"]
    for party in COLUMNS:
        pd.testing.assert_frame_equal(forward[party], backward[party])


def test_several_partners_each_draw_their_own_sample_and_extras():
    columns = {"bank": ["account", "y"], "shop": ["income"], "telco": ["city", "age"], "insurer": ["job"]}
    tables = split(columns=columns, overlap=0.5, extra=0.2)
    bank = ids(tables["bank"])
    partners = [name for name in columns if name != "bank"]
    samples = [frozenset(ids(tables[name]) & bank) for name in partners]
    assert all(len(sample) == 100 for sample in samples)
    assert len(set(samples)) == len(partners)  # three different samples
    extras = [ids(tables[name]) - bank for name in partners]
    assert all(len(extra) == 40 for extra in extras)
    assert not (extras[0] & extras[1]) and not (extras[0] & extras[2]) and not (extras[1] & extras[2])


def test_reserved_ids_are_never_generated():
    train = split(seed=3)
    used = set().union(*(ids(table) for table in train.values()))
    test = split(seed=3, reserved_ids=used)  # the same seed would otherwise draw the same IDs
    for table in test.values():
        assert ids(table).isdisjoint(used)


def test_source_index_is_ignored():
    df = customers()
    shuffled_index = df.set_axis(np.arange(len(df))[::-1] * 7)
    for party in COLUMNS:
        pd.testing.assert_frame_equal(split(df)[party], split(shuffled_index)[party])


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=4, max_value=120),
    overlap=st.floats(min_value=0.3, max_value=1.0),
    extra=st.floats(min_value=0.0, max_value=0.6),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_invariants_hold_for_any_overlap_extra_and_seed(n, overlap, extra, seed):
    df = customers(n, seed=seed % 1000)
    tables = datasets.partition(
        df, columns=COLUMNS, label_party="bank", label="y", overlap=overlap, extra=extra, seed=seed
    )
    check_invariants(df, tables, overlap=overlap, extra=extra)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"columns": {"bank": ["age", "y", "salary"]}}, DataError, r"\['salary'\] are not in the source"),
        ({"columns": {"bank": ["age", "y"], "shop": ["age"]}}, ConfigError, "to both 'bank' and 'shop'"),
        ({"columns": {"bank": ["age", "age", "y"]}}, ConfigError, "'age' is given twice"),
        ({"columns": {"bank": ["age"], "shop": ["y"]}}, ConfigError, r"'shop'; add it to columns\['bank'\]"),
        ({"columns": {"bank": ["age"]}}, ConfigError, "not in any party's columns"),
        ({"columns": {"bank": ["age", "y"], "shop": []}}, ConfigError, "non-empty list"),
        ({"columns": {"bank": "age"}}, ConfigError, "non-empty list"),
        ({"columns": {}}, ConfigError, "non-empty dict"),
        ({"columns": {"bank": ["age", "y"], 2: ["job"]}}, ConfigError, "party names must be non-empty"),
        ({"label_party": "insurer"}, ConfigError, "label_party 'insurer' is not a party"),
        ({"overlap": 0.0}, ConfigError, r"overlap must be in \(0.0, 1.0\]"),
        ({"overlap": 1.2}, ConfigError, "overlap must be in"),
        ({"overlap": float("nan")}, ConfigError, "overlap must be a number"),
        ({"overlap": "0.5"}, ConfigError, "overlap must be a number"),
        ({"extra": -0.1}, ConfigError, "extra must be finite and >= 0.0"),
        ({"extra": float("inf")}, ConfigError, "extra must be finite"),
        ({"seed": -1}, ConfigError, "seed must be a non-negative integer"),
        ({"seed": 1.5}, ConfigError, "seed must be a non-negative integer"),
        ({"id_column": "age"}, ConfigError, "id_column 'age' is also a data column of 'bank'"),
    ],
)
def test_bad_arguments_are_rejected_with_a_fix(kwargs, error, message):
    with pytest.raises(error, match=message):
        split(**kwargs)


def test_bad_source_tables_are_rejected():
    with pytest.raises(DataError, match="no rows"):
        split(customers().iloc[:0])
    with pytest.raises(DataError, match="pandas DataFrame"):
        split(customers().to_dict())
    with pytest.raises(DataError, match="duplicate column names"):
        split(customers().rename(columns={"city": "job"}))
    with pytest.raises(DataError, match="no shared customer; raise overlap"):
        split(customers(3), overlap=0.1)
