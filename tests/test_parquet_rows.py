"""A table read from Parquet a row group at a time gives the same rows as the table in memory, in bounded memory."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vsplit.data.parquet_rows import ParquetRows
from vsplit.errors import DataError


def write_folder(tmp_path, *, n: int = 1000, files: int = 3, group: int = 64, seed: int = 0) -> pa.Table:
    """A table of ``n`` rows split over ``files`` Parquet files of ``group``-row row groups; returns it whole."""
    rng = np.random.default_rng(seed)
    columns = {"row": np.arange(n), "x": rng.normal(size=n), "cat": rng.choice(["a", "b"], n),
               "y": rng.integers(0, 2, n)}
    table = pa.table(columns)
    bounds = np.linspace(0, n, files + 1).astype(int)
    for i in range(files):
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        pq.write_table(part, tmp_path / f"part-{i:03d}.parquet", row_group_size=group)
    return table


def test_rows_in_any_order_equal_the_in_memory_table(tmp_path):
    table = write_folder(tmp_path)
    rows = ParquetRows(tmp_path, cache_groups=3)
    assert len(rows) == 1000 and rows.groups == 3 * -(-334 // 64)
    order = np.random.default_rng(1).permutation(1000)
    for batch in np.array_split(order, 8):
        assert rows.take(batch).equals(table.take(pa.array(batch)))
    assert rows.take([5, 5, 999]).column("row").to_pylist() == [5, 5, 999]


def test_the_cache_holds_at_most_the_configured_row_groups(tmp_path):
    write_folder(tmp_path)
    rows = ParquetRows(tmp_path, columns=["x"], cache_groups=2)
    rows.take(np.arange(0, 1000, 7))  # touches every row group
    assert len(rows._cache) == 2
    first = rows.reads
    rows.take([999, 998])  # the last group is cached
    assert rows.reads == first
    rows.take([0])  # the first group was evicted long ago
    assert rows.reads == first + 1


def test_streaming_batches_give_every_row_in_order(tmp_path):
    table = write_folder(tmp_path, n=700, files=2, group=50)
    rows = ParquetRows(tmp_path, columns=["row", "y"])
    batches = list(rows.batches(batch_rows=32))
    assert max(b.num_rows for b in batches) <= 32
    assert pa.Table.from_batches(batches).equals(table.select(["row", "y"]))


def test_numpy_columns_match_the_table(tmp_path):
    table = write_folder(tmp_path, n=200, files=1)
    got = ParquetRows(tmp_path / "part-000.parquet").numpy([3, 1], columns=["x", "y"], dtype=np.float32)
    want = np.column_stack([table.column(c).to_numpy()[[3, 1]] for c in ("x", "y")]).astype(np.float32)
    assert got.dtype == np.float32 and np.array_equal(got, want)


def test_bad_paths_columns_and_rows_name_the_fix(tmp_path):
    with pytest.raises(DataError, match="no such Parquet file or folder"):
        ParquetRows(tmp_path / "missing.parquet")
    with pytest.raises(DataError, match=r"holds no \.parquet files"):
        ParquetRows(tmp_path)
    write_folder(tmp_path, n=100, files=1)
    with pytest.raises(DataError, match=r"columns \['income'\] not found"):
        ParquetRows(tmp_path, columns=["income"])
    with pytest.raises(DataError, match=r"rows must be in 0\.\.99"):
        ParquetRows(tmp_path).take([100])
