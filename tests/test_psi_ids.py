"""ID hygiene: normalisation, non-string IDs, duplicates, and streaming ID columns from Parquet and CSV."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vsplit.data.id_sources import as_source
from vsplit.errors import AlignmentError, ConfigError, DataError
from vsplit.psi import CsvIds, IdPolicy, ParquetIds, normalise_id
from vsplit.psi.prepare import prepare_ids
from vsplit.runtime.psi import align_in_process


def test_strings_are_stripped_and_nfc_normalised_but_keep_case_by_default() -> None:
    policy = IdPolicy()
    assert normalise_id("  Zoe\t", policy=policy) == "Zoe"
    assert normalise_id("Zoe\u0308", policy=policy) == normalise_id("Zo\u00eb", policy=policy)  # decomposed == composed
    assert normalise_id("ABC", policy=policy) != normalise_id("abc", policy=policy)
    assert normalise_id("00123", policy=policy) == "00123"


def test_case_folding_is_opt_in() -> None:
    assert normalise_id("Straße", policy=IdPolicy(casefold=True)) == "strasse"


def test_integer_ids_become_decimal_text_and_match_strings() -> None:
    policy = IdPolicy()
    assert normalise_id(123, policy=policy) == "123"
    assert normalise_id(np.int64(-5), policy=policy) == "-5"
    out = align_in_process({"bank": [1, 2, 3], "shop": ["3", " 2 ", "7"]}, label_party="bank")
    assert sorted(out["bank"].ids) == ["2", "3"]


@pytest.mark.parametrize(
    ("value", "fix"),
    [(None, "missing"), (float("nan"), "missing"), (1.0, "cast the ID column"), (True, "bool"), (b"x", "str or int")],
)
def test_unusable_ids_are_refused_with_the_row_and_the_fix(value: object, fix: str) -> None:
    with pytest.raises(DataError, match="row 4") as caught:
        normalise_id(value, policy=IdPolicy(), row=4)
    assert fix in str(caught.value)


def test_empty_id_after_stripping_is_refused() -> None:
    with pytest.raises(DataError, match="row 0 is empty"):
        normalise_id("   ", policy=IdPolicy(), row=0)


def test_unknown_dedupe_policy_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="error, first"):
        IdPolicy(dedupe="last")  # type: ignore[arg-type]


def test_duplicates_are_refused_by_default_with_count_and_fix() -> None:
    with pytest.raises(AlignmentError, match=r"2 duplicate ID\(s\).*row 2.*psi.duplicates = \"first\""):
        prepare_ids(as_source(["a", "b", "a ", "a"]), policy=IdPolicy(), salt=bytes(32), label=b"L")


def test_dedupe_first_keeps_the_first_row_of_each_id() -> None:
    out = align_in_process(
        {"bank": ["x", "y", "x", "z"], "shop": ["z", "x", "x"]},
        label_party="bank",
        policies={"bank": IdPolicy(dedupe="first"), "shop": IdPolicy(dedupe="first")},
    )
    assert dict(zip(out["bank"].ids, out["bank"].rows.tolist(), strict=True)) == {"x": 0, "z": 3}
    assert dict(zip(out["shop"].ids, out["shop"].rows.tolist(), strict=True)) == {"x": 1, "z": 0}
    assert out["bank"].stats.duplicates == 1 and out["shop"].stats.duplicates == 1


def test_duplicates_abort_the_run_and_the_peer_learns_only_bad_data() -> None:
    with pytest.raises(AlignmentError, match="duplicate"):
        align_in_process({"bank": ["a", "a"], "shop": ["a"]}, label_party="bank")


def test_ids_stream_from_a_parquet_column(tmp_path) -> None:
    path = tmp_path / "bank.parquet"
    pq.write_table(pa.table({"cid": pa.array([10, 11, 12, 13], pa.int64()), "x": [1, 2, 3, 4]}), path)
    out = align_in_process({"bank": ParquetIds(path, column="cid"), "shop": ["13", "11", "99"]}, label_party="bank")
    assert out["bank"].ids is None  # a file source keeps no strings
    assert sorted(out["bank"].rows.tolist()) == [1, 3]
    assert out["shop"].take(["13", "11", "99"]) == [str(10 + r) for r in out["bank"].rows.tolist()]


def test_ids_stream_from_a_csv_column_as_text(tmp_path) -> None:
    path = tmp_path / "shop.csv"
    pd.DataFrame({"cid": ["007", "008", "NA"], "v": [1, 2, 3]}).to_csv(path, index=False)
    source = CsvIds(path, column="cid")
    assert [v for batch in source.batches(2) for v in batch] == ["007", "008", "NA"]  # no int or NaN conversion
    out = align_in_process({"bank": ["NA", "7", "007"], "shop": source}, label_party="bank")
    assert sorted(out["bank"].ids) == ["007", "NA"]


def test_a_missing_column_names_the_available_ones(tmp_path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [1]}), path)
    with pytest.raises(DataError, match="no column 'cid'; the columns are id"):
        ParquetIds(path, column="cid")
