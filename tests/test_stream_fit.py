"""Preprocessing fitted from a Parquet file read batch by batch equals the fit on the whole table in memory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vsplit.data.preprocess import TablePreprocessor
from vsplit.data.stream_fit import fit_parquet
from vsplit.errors import DataError


def credit_table(n: int, *, holes: bool, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({
        "balance": rng.lognormal(8, 1.5, n),
        "age": rng.integers(18, 90, n),
        "job": rng.choice(["admin", "blue-collar", "retired", "student"], n).astype(object),
        "grade": pd.Categorical(rng.choice(["A", "B", "C"], n)),
        "owner": rng.random(n) < 0.3,
        "zip": rng.integers(1000, 1010, n),
    })
    if holes:  # holes in some row groups only, so batches differ in dtype unless widened
        table.loc[table.index[5000:5100], "balance"] = np.nan
        table["age"] = table["age"].astype("Int64")
        table.loc[table.index[7000:7010], "age"] = pd.NA
        table.loc[table.index[3:9], "job"] = None
        table["zip"] = table["zip"].astype("Int64")
        table.loc[table.index[n - 1 :], "zip"] = pd.NA
    return table


def assert_same_fit(streamed: TablePreprocessor, fitted: TablePreprocessor) -> None:
    a, b = streamed.state(), fitted.state()
    for key in ("columns", "categorical", "numeric", "categories", "imputed"):
        assert a[key] == b[key], key
    if "quantiles" in b["scaler"]:  # the same rows drawn, the same quantiles: bit for bit
        assert np.array_equal(a["scaler"]["quantiles"], b["scaler"]["quantiles"])
        assert np.array_equal(a["scaler"]["references"], b["scaler"]["references"])
    else:  # moments merged batch by batch: equal to float rounding
        np.testing.assert_allclose(a["scaler"]["mean"], b["scaler"]["mean"], rtol=1e-12, atol=0)
        np.testing.assert_allclose(a["scaler"]["std"], b["scaler"]["std"], rtol=1e-12, atol=0)


@pytest.mark.parametrize("scaling", ["quantile", "standard"])
@pytest.mark.parametrize("missing", ["impute", "error"])
def test_streamed_fit_equals_fit_in_memory_over_many_row_groups(tmp_path, scaling, missing):
    table = credit_table(12_000, holes=missing == "impute")  # over 10,000 rows: the quantiles' subsample is drawn
    path = tmp_path / "bank.parquet"  # no pandas metadata: the integer columns with nulls read back as float64
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False).replace_schema_metadata(None), path,
                   row_group_size=1500)
    options = {"scaling": scaling, "missing": missing, "seed": 7, "categorical": ["job", "grade", "owner", "zip"]}
    fitted = TablePreprocessor(**options).fit(pd.read_parquet(path))
    streamed = fit_parquet(TablePreprocessor(**options), path, columns=list(table.columns), batch_rows=1000)
    assert_same_fit(streamed, fitted)
    if missing == "impute":
        assert set(fitted.imputed_) == {"balance", "age"} and "<missing>" in fitted.categories_["job"]
        assert "1000.0" in fitted.categories_["zip"]  # widened: float over the whole table
    sample = pd.read_parquet(path).iloc[4990:5020]
    for got, want in zip(streamed.transform(sample), fitted.transform(sample), strict=True):
        assert np.array_equal(got.numpy(), want.numpy()) if scaling == "quantile" else np.allclose(got, want)


def test_streamed_fit_detects_categories_by_dtype_like_the_fit_in_memory(tmp_path):
    table = credit_table(300, holes=False)
    path = tmp_path / "t.parquet"
    table.to_parquet(path, row_group_size=64)
    streamed = fit_parquet(TablePreprocessor(), path, columns=list(table.columns), batch_rows=50)
    assert_same_fit(streamed, TablePreprocessor().fit(table))
    assert streamed.categorical_ == ["job", "grade", "owner"]


def test_streamed_fit_errors_name_the_column_and_the_fix(tmp_path):
    path = tmp_path / "t.parquet"
    table = credit_table(100, holes=True).assign(opened=pd.Timestamp("2020-01-01"))
    table.to_parquet(path, row_group_size=32)
    with pytest.raises(DataError, match=r"columns \['income'\] not found .*fix the column names"):
        fit_parquet(TablePreprocessor(), path, columns=["balance", "income"])
    with pytest.raises(DataError, match=r"column 'opened' is neither numeric nor categorical.*convert it"):
        fit_parquet(TablePreprocessor(), path, columns=["balance", "opened"])
    with pytest.raises(DataError, match=r"missing values \(NaN\) in columns \{'job': 6\}.*missing='impute'"):
        fit_parquet(TablePreprocessor(), path, columns=["balance", "job"])
