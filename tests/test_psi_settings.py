"""A party's [psi] section reaches its PSI machine: buckets, memory budget and backend; bad values are named."""

from __future__ import annotations

import importlib.util

import pytest
from test_config import PARTNER, write

from vsplit.app.session import psi_machine
from vsplit.config import load_config
from vsplit.errors import ConfigError
from vsplit.node import PartyNode
from vsplit.psi.parallel import ProcessBackend, SerialBackend
from vsplit.topology.graph import Topology


def test_psi_buckets_budget_and_workers_reach_the_party_process_psi_machine(tmp_path):
    path = write(tmp_path, PARTNER + "[psi]\nbuckets = 8\nmemory_budget_mb = 64\nworkers = 2\n")
    node = PartyNode(load_config(path), progress=False)
    node._psi_backend = backend = node.open_psi_backend()
    try:
        assert isinstance(backend, ProcessBackend) and backend.workers == 2
        settings = node.psi_settings()
        assert (settings.config.buckets, settings.config.memory_budget_mb) == (8, 64)
        topology = Topology.vertical(label_party="bank", feature_parties=["partner"], width=4)
        machine = psi_machine("partner", topology, ["a", "b"], settings)
        assert machine._pair._config.buckets == 8 and machine._pair._keys._backend is backend
    finally:
        backend.close()


def test_the_default_backend_computes_in_the_party_process(tmp_path):
    node = PartyNode(load_config(write(tmp_path, PARTNER)), progress=False)
    assert isinstance(node.open_psi_backend(), SerialBackend)
    assert node.psi_settings().config.buckets == 1


@pytest.mark.parametrize(("psi", "message"), [
    ('backend = "spark"', "psi.backend: must be one of process, ray; got 'spark'"),
    ("buckets = 0", "psi.buckets: must be 1 (no buckets) to 4096, got 0"),
    ("memory_budget_mb = -1", "psi.memory_budget_mb: must be 0 or more"),
    ('ray_address = "auto"', "psi.ray_address: only used with psi.backend = \"ray\""),
])
def test_bad_psi_settings_are_named_with_the_fix(tmp_path, psi, message):
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, PARTNER + f"[psi]\n{psi}\n"))
    assert message in str(caught.value)


def test_the_ray_backend_without_ray_installed_says_how_to_install_it(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(ConfigError, match=r"psi.backend: 'ray' needs Ray, which is not installed here; pip install "
                                          r"'vsplit\[ray\]'"):
        load_config(write(tmp_path, PARTNER + '[psi]\nbackend = "ray"\n'))


def test_data_stream_trains_from_the_parquet_file_and_needs_one(tmp_path, monkeypatch):
    import pandas as pd
    from test_parquet_training import no_whole_table_reads

    from vsplit.data.id_sources import ParquetIds
    from vsplit.data.parquet_table import ParquetTable

    pd.DataFrame({"customer_id": ["1", "2"], "x": [2.0, 3.0]}).to_parquet(tmp_path / "partner.parquet")
    path = write(tmp_path, PARTNER.replace('path = "partner.csv"', 'path = "partner.parquet"\nstream = true'))
    no_whole_table_reads(monkeypatch)
    node = PartyNode(load_config(path), progress=False)
    assert node.party._stream[0].endswith("partner.parquet") and node.party.inputs[0].shape[0] == 0
    assert isinstance(node.table, ParquetTable) and isinstance(node.party.ids, ParquetIds)
    assert node.party.preprocessor.columns_ == ["x"]
    with pytest.raises(ConfigError, match=r"data\.stream: reads batches from a Parquet file"):
        load_config(write(tmp_path, PARTNER.replace('path = "partner.csv"', 'path = "partner.csv"\nstream = true')))
