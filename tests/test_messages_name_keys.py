"""Errors a party config's user meets name the config key to fix (``data.id_column``, ``psi.duplicates``,
``topology.task``), never an internal class or argument alone; an unknown key suggests the close match."""

from __future__ import annotations

import pandas as pd
import pytest

from vsplit.config import load_config
from vsplit.data.parquet_table import open_table
from vsplit.data.sources import read_table
from vsplit.errors import AlignmentError, ConfigError, DataError, ProtocolError
from vsplit.models.tasks import detect_positive
from vsplit.psi import IdPolicy, LabelParty, Partner
from vsplit.psi.prepare import prepare_ids
from vsplit.runtime.inprocess import connect, run_machines

BANK = """
[party]
name = "bank"
role = "label"
[data]
path = "bank.csv"
{data}
[network]
listen = "127.0.0.1:7700"
key = "k"
cert = "c"
peers = {{ partner = "p" }}
"""


def test_a_misspelt_key_suggests_the_close_match(tmp_path):
    path = tmp_path / "party.toml"
    path.write_text(BANK.format(data='lable = "y"'))
    with pytest.raises(ConfigError, match=r"data\.lable: unknown key; did you mean data\.label\? valid keys here"):
        load_config(path, check_files=False)


def test_a_misspelt_section_suggests_the_close_match(tmp_path):
    path = tmp_path / "party.toml"
    path.write_text(BANK.format(data='label = "y"') + "[trian]\nepochs = 3\n")
    with pytest.raises(ConfigError, match=r"trian: unknown key; did you mean train\?"):
        load_config(path, check_files=False)


def test_a_key_far_from_any_gets_no_guess(tmp_path):
    path = tmp_path / "party.toml"
    path.write_text(BANK.format(data='label = "y"\nzzz = 1'))
    with pytest.raises(ConfigError) as caught:
        load_config(path, check_files=False)
    assert "data.zzz: unknown key; valid keys here" in str(caught.value)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_missing_id_column_names_data_id_column(tmp_path, suffix):
    path = tmp_path / f"bank{suffix}"
    frame = pd.DataFrame({"cid": ["a", "b"], "y": [0, 1], "x": [1.0, 2.0]})
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
    for read in (read_table, open_table) if suffix == ".parquet" else (read_table,):
        with pytest.raises(DataError) as caught:
            read(path, id_column="customer_id", label="y")
        assert "fix data.id_column in the party config" in str(caught.value)
        assert "data.*" not in str(caught.value)
    with pytest.raises(DataError, match=r"fix data\.features and data\.label in the party config"):
        read_table(path, id_column="cid", features=["age"], label="target")


def test_a_label_with_three_values_names_topology_task():
    with pytest.raises(DataError, match=r'3 distinct values.*topology\.task = "multiclass" in the party config'):
        detect_positive(pd.Series(["no", "yes", "maybe"]), "y")


def test_duplicate_ids_name_psi_duplicates():
    from vsplit.data.id_sources import as_source
    from vsplit.psi.ids import DEDUPE_POLICIES

    with pytest.raises(AlignmentError, match=r'set psi\.duplicates = "first" in the party config'):
        prepare_ids(as_source(["a", "a"]), policy=IdPolicy(), salt=bytes(32), label=b"L")
    with pytest.raises(ConfigError, match=r"psi\.duplicates: 'last' is not one of " + ", ".join(DEDUPE_POLICIES)):
        IdPolicy(dedupe="last")  # type: ignore[arg-type]


def test_parties_that_normalise_ids_differently_are_told_psi_case_fold():
    pumps = connect(["bank", "shop"], session=b"s" * 16)
    machines = {"bank": LabelParty(["a"], partners=["shop"]),
                "shop": Partner(["A"], label_party="bank", policy=IdPolicy(casefold=True))}
    with pytest.raises(ProtocolError) as caught:
        run_machines(pumps, machines)
    assert "psi.case_fold" in str(caught.value) and "IdPolicy(strip" not in str(caught.value)


def test_no_shared_customer_names_the_keys_to_check():
    pumps = connect(["bank", "shop"], session=b"s" * 16)
    with pytest.raises(AlignmentError) as caught:
        run_machines(pumps, {"bank": LabelParty(["a", "b"], partners=["shop"]),
                             "shop": Partner(["c", "d"], label_party="bank")})
    assert "data.id_column" in str(caught.value) and "psi.case_fold" in str(caught.value)
