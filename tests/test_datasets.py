"""The bundled data sets and the presets built on them."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.model_selection import train_test_split

from vsplit import datasets
from vsplit.errors import ConfigError, DataError

HERE = Path(datasets.__file__).parent

# Published counts (PROVENANCE.md), also measured by datasets/build.py from the raw CSVs.
EXPECTED = {
    "bank_full": {"shape": (45211, 17), "label": "y", "positive": "yes", "positives": 5289},
    "bank": {"shape": (4521, 17), "label": "y", "positive": "yes", "positives": 521},
    "default_credit": {"shape": (30000, 25), "label": "default", "positive": 1, "positives": 6636},
}
BANK_COLUMNS = [
    "age", "job", "marital", "education", "default", "balance", "housing", "loan", "contact", "day", "month",
    "duration", "campaign", "pdays", "previous", "poutcome", "y",
]
CREDIT_COLUMNS = [
    "ID", "LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE",
    "PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5", "PAY_6",
    *(f"BILL_AMT{i}" for i in range(1, 7)), *(f"PAY_AMT{i}" for i in range(1, 7)), "default",
]
CALLS = ["contact", "day", "month", "duration", "campaign", "pdays", "previous", "poutcome"]
PRESET_COLUMNS = {
    "bank_marketing": (
        ["age", "job", "marital", "education", "default", "balance", "housing", "loan", "y"], CALLS,
    ),
    "bank_marketing_no_duration": (
        ["age", "job", "marital", "education", "default", "balance", "housing", "loan", "y"],
        [c for c in CALLS if c != "duration"],
    ),
    "secretflow_bank": (
        ["age", "job", "marital", "education", "y"], ["default", "balance", "housing", "loan", *CALLS],
    ),
    "default_credit": (
        ["PAY_6", *(f"BILL_AMT{i}" for i in range(1, 7)), *(f"PAY_AMT{i}" for i in range(1, 7)), "default"],
        ["LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE", "PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5"],
    ),
}

TWO_PARTY = [name for name in datasets.PRESETS if name != "digits"]
SOURCE = {
    "bank_marketing": "bank_full",
    "bank_marketing_no_duration": "bank_full",
    "secretflow_bank": "bank",
    "default_credit": "default_credit",
}


@functools.cache
def cached_load(name: str) -> pd.DataFrame:
    return datasets.load(name)


@functools.cache
def cached_preset(name: str, seed: int = 0) -> datasets.Preset:
    return datasets.preset(name, seed=seed)


def ids(table: pd.DataFrame) -> set[str]:
    return set(table["customer_id"])


def rows(df: pd.DataFrame) -> list[tuple]:
    """The rows of a table as sorted tuples: compares contents regardless of order and IDs."""
    return sorted(df.drop(columns="customer_id", errors="ignore").itertuples(index=False, name=None))


# --- loaders ---


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_data_set_has_the_published_size_and_label_balance(name):
    df = cached_load(name)
    expected = EXPECTED[name]
    assert df.shape == expected["shape"]
    assert int((df[expected["label"]] == expected["positive"]).sum()) == expected["positives"]
    assert not df.isna().any().any()


def test_bank_marketing_keeps_its_raw_columns_and_types():
    for name in ("bank_full", "bank"):
        df = cached_load(name)
        assert list(df.columns) == BANK_COLUMNS
        text = ["job", "marital", "education", "default", "housing", "loan", "contact", "month", "poutcome"]
        text.append("y")
        assert all(pd.api.types.is_string_dtype(df[c]) for c in text)
        assert all(df[c].dtype == np.int64 for c in BANK_COLUMNS if c not in text)
        assert set(df["y"]) == {"yes", "no"}


def test_default_credit_keeps_id_and_renames_the_label():
    df = cached_load("default_credit")
    assert list(df.columns) == CREDIT_COLUMNS
    assert (df.dtypes == np.int64).all()
    assert df["ID"].tolist() == list(range(1, 30001))
    assert set(df["default"]) == {0, 1}
    assert df.loc[df["ID"] == 7, "LIMIT_BAL"].item() == 500_000  # "5e+05" in the CSV


def test_loading_twice_gives_independent_copies():
    first = datasets.load("bank")
    first.loc[0, "age"] = -1
    assert datasets.load("bank").loc[0, "age"] != -1


def test_unknown_data_set_lists_the_valid_names():
    with pytest.raises(ConfigError, match="'adult'; choose one of bank, bank_full, default_credit"):
        datasets.load("adult")


def test_bundled_parquet_files_are_small_and_zstd_compressed():
    import pyarrow.parquet as pq

    files = sorted(HERE.glob("*/*.parquet"))
    assert [f.relative_to(HERE).as_posix() for f in files] == sorted(datasets.DATASETS.values())
    assert sum(f.stat().st_size for f in files) < 2_000_000
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert meta.row_group(0).column(0).compression == "ZSTD"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_readme_states_the_measured_numbers(name):
    folder = HERE / datasets.DATASETS[name]
    readme = (folder.parent / "README.md").read_text(encoding="utf-8")
    expected = EXPECTED[name]
    rows_, cols = expected["shape"]
    assert f"{rows_} x {cols}" in readme
    assert f"{expected['positives']} positive" in readme
    assert "CC BY 4.0" in readme
    assert "sha256" in readme
    index = (HERE / "README.md").read_text(encoding="utf-8")
    assert f"| `{name}` |" in index
    assert f"{rows_} x {cols}" in index
    assert f"| {expected['positives']} (" in index


def test_build_refuses_a_csv_whose_checksum_differs(tmp_path):
    from vsplit.datasets import build

    fake = tmp_path / build.SOURCES["bank"].csv
    fake.parent.mkdir(parents=True)
    fake.write_text('"age";"y"\n30;"no"\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"differs from PROVENANCE\.md"):
        build.convert("bank", tmp_path)
    with pytest.raises(ConfigError, match="pass --source"):
        build.convert("default_credit", tmp_path)


def test_build_stores_whole_number_floats_as_integers_and_refuses_fractions():
    from vsplit.datasets import build

    converted = build._whole_numbers_to_int(pd.DataFrame({"LIMIT_BAL": [5e05, 20000.0]}), "x.csv")
    assert converted["LIMIT_BAL"].tolist() == [500000, 20000]
    assert converted["LIMIT_BAL"].dtype == np.int64
    with pytest.raises(DataError, match="'LIMIT_BAL' holds non-whole numbers"):
        build._whole_numbers_to_int(pd.DataFrame({"LIMIT_BAL": [0.5]}), "x.csv")


# --- presets ---


@pytest.mark.parametrize("name", TWO_PARTY)
def test_preset_gives_each_party_exactly_its_listed_columns(name):
    bank_columns, partner_columns = PRESET_COLUMNS[name]
    p = cached_preset(name)
    assert p.parties == ("bank", "partner")
    assert (p.label_party, p.id_column) == ("bank", "customer_id")
    for tables in (p.train, p.test):
        assert list(tables["bank"].columns) == ["customer_id", *bank_columns]
        assert list(tables["partner"].columns) == ["customer_id", *partner_columns]
    assert p.label == bank_columns[-1]
    assert p.positive_label in set(p.train["bank"][p.label])


@pytest.mark.parametrize("name", TWO_PARTY)
def test_preset_train_and_test_hold_different_customers(name):
    p = cached_preset(name)
    train_ids = ids(p.train["bank"]) | ids(p.train["partner"])
    test_ids = ids(p.test["bank"]) | ids(p.test["partner"])
    assert train_ids.isdisjoint(test_ids)
    source = cached_load(SOURCE[name])
    assert len(p.train["bank"]) + len(p.test["bank"]) == len(source)


@pytest.mark.parametrize("name", ["bank_marketing", "bank_marketing_no_duration", "default_credit"])
def test_partner_knows_85_percent_of_the_bank_customers_plus_10_percent_others_in_both_splits(name):
    p = cached_preset(name)
    for tables in (p.train, p.test):
        n = len(tables["bank"])
        shared = ids(tables["bank"]) & ids(tables["partner"])
        assert len(shared) == int(np.floor(0.85 * n + 0.5))
        assert len(ids(tables["partner"]) - shared) == int(np.floor(0.10 * n + 0.5))


@pytest.mark.parametrize("name", ["bank_marketing", "default_credit"])
def test_stratified_split_keeps_the_label_rate(name):
    p = cached_preset(name)
    source = cached_load(SOURCE[name])
    rate = (source[p.label] == p.positive_label).mean()
    for tables in (p.train, p.test):
        assert abs((tables["bank"][p.label] == p.positive_label).mean() - rate) < 0.001
    assert len(p.test["bank"]) == int(np.ceil(0.2 * len(source)))


def test_no_duration_preset_drops_the_leaking_column_and_says_why():
    p = cached_preset("bank_marketing_no_duration")
    assert all("duration" not in table.columns for table in (*p.train.values(), *p.test.values()))
    assert "realistic" in p.description
    assert "leaks the label" in cached_preset("bank_marketing").description


def test_secretflow_bank_uses_their_unstratified_sklearn_split_with_full_overlap():
    source = cached_load("bank")
    train_index, test_index = train_test_split(np.arange(len(source)), train_size=0.8, random_state=1234)
    assert (len(train_index), len(test_index)) == (3616, 905)
    p = cached_preset("secretflow_bank")
    for tables, index in ((p.train, train_index), (p.test, test_index)):
        assert len(tables["bank"]) == len(tables["partner"]) == len(index)
        assert ids(tables["bank"]) == ids(tables["partner"])
        pooled = p.pooled("train" if index is train_index else "test")
        assert rows(pooled[source.columns]) == rows(source.iloc[index])


def test_secretflow_bank_split_does_not_depend_on_the_seed_but_ids_do():
    first, other = cached_preset("secretflow_bank", 0), cached_preset("secretflow_bank", 9)
    assert rows(first.train["bank"]) == rows(other.train["bank"])
    assert ids(first.train["bank"]).isdisjoint(ids(other.train["bank"]))


def test_preset_is_reproducible_by_seed():
    first, again, other = (datasets.preset("secretflow_bank", seed=s) for s in (4, 4, 5))
    assert ids(first.test["bank"]).isdisjoint(ids(other.test["bank"]))
    for split in ("train", "test"):
        for party in first.parties:
            pd.testing.assert_frame_equal(getattr(first, split)[party], getattr(again, split)[party])
    stratified = [cached_preset("default_credit", s).train["bank"] for s in (0, 1)]
    assert rows(stratified[0]) != rows(stratified[1])


def test_default_credit_codes_are_strings_and_marked_categorical():
    p = cached_preset("default_credit")
    assert p.positive_label == 1
    assert p.categorical == {"bank": [], "partner": ["SEX", "EDUCATION", "MARRIAGE"]}
    partner = p.train["partner"]
    assert all(pd.api.types.is_string_dtype(partner[c]) for c in ("SEX", "EDUCATION", "MARRIAGE"))
    assert set(partner["SEX"]) == {"1", "2"}


def test_bank_marketing_categorical_columns_are_its_text_features():
    p = cached_preset("bank_marketing")
    assert p.categorical == {
        "bank": ["job", "marital", "education", "default", "housing", "loan"],
        "partner": ["contact", "month", "poutcome"],
    }


def test_pooled_joins_the_customers_every_party_knows_in_the_bank_order():
    p = cached_preset("bank_marketing")
    pooled = p.pooled("test")
    bank, partner = p.test["bank"], p.test["partner"]
    shared = ids(bank) & ids(partner)
    assert len(pooled) == len(shared)
    assert pooled["customer_id"].tolist() == [i for i in bank["customer_id"] if i in shared]
    assert list(pooled.columns) == ["customer_id", *bank.columns[1:], *partner.columns[1:]]
    one = pooled.iloc[0]
    assert one[partner.columns[1:]].tolist() == (
        partner.set_index("customer_id").loc[one["customer_id"]].tolist()
    )


def test_bad_preset_arguments_are_rejected():
    with pytest.raises(ConfigError, match="unknown preset 'bank'; choose one of bank_marketing,"):
        datasets.preset("bank")
    with pytest.raises(ConfigError, match="seed must be an integer"):
        datasets.preset("bank_marketing", seed=-1)
    with pytest.raises(ConfigError, match="split must be 'train' or 'test'"):
        cached_preset("secretflow_bank").pooled("valid")


def test_public_api_is_pinned():
    assert sorted(datasets.__all__) == [
        "DATASETS", "HORIZONTAL", "HorizontalSplit", "PRESETS", "Preset", "horizontal_split", "load", "partition",
        "preset",
    ]
    assert datasets.PRESETS == (
        "bank_marketing", "bank_marketing_no_duration", "secretflow_bank", "default_credit", "digits",
    )


# --- the one-party digits preset ---

PIXELS = [f"px{i:02d}" for i in range(64)]


def test_digits_preset_gives_the_client_ids_pixels_and_label():
    p = cached_preset("digits")
    assert p.parties == ("client",)
    assert (p.label_party, p.label, p.positive_label, p.id_column) == ("client", "digit", None, "customer_id")
    assert p.categorical == {"client": []}
    for table in (p.train["client"], p.test["client"]):
        assert list(table.columns) == ["customer_id", *PIXELS, "digit"]
        assert (table[PIXELS].dtypes == np.float32).all()
        assert table[PIXELS].min().min() >= 0 and table[PIXELS].max().max() <= 16
        assert table["customer_id"].str.fullmatch(r"d\d{4}").all()
    assert (len(p.train["client"]), len(p.test["client"])) == (1437, 360)


def test_digits_train_and_test_hold_different_images_and_every_class():
    from sklearn.datasets import load_digits

    p = cached_preset("digits")
    train, test = p.train["client"], p.test["client"]
    assert ids(train).isdisjoint(ids(test))
    assert len(ids(train) | ids(test)) == 1797
    counts = np.bincount(load_digits().target)
    for table in (train, test):
        assert sorted(table["digit"].unique()) == list(range(10))
        share = np.bincount(table["digit"], minlength=10) / len(table)
        assert np.abs(share - counts / counts.sum()).max() < 0.01  # stratified


def test_digits_ids_name_the_same_image_whatever_the_seed():
    from sklearn.datasets import load_digits

    images = load_digits()
    for seed in (0, 7):
        table = cached_preset("digits", seed).test["client"]
        index = table["customer_id"].str[1:].astype(int).to_numpy()
        np.testing.assert_array_equal(table[PIXELS].to_numpy(), images.data[index].astype(np.float32))
        np.testing.assert_array_equal(table["digit"].to_numpy(), images.target[index])
    assert ids(cached_preset("digits", 0).test["client"]) != ids(cached_preset("digits", 7).test["client"])


def test_digits_pixels_go_through_standard_scaling():
    from vsplit.data.preprocess import TablePreprocessor

    p = cached_preset("digits")
    prep = TablePreprocessor(scaling="standard").fit(p.train["client"][PIXELS])
    cat, num = prep.transform(p.test["client"][PIXELS])
    assert cat.shape == (360, 0) and num.shape == (360, 64)
    assert bool(torch.isfinite(num).all())
