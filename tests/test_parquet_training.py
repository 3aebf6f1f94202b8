"""Training on rows read from Parquet batch by batch equals training on the same table in memory, bit for bit, and a
party built on a :class:`ParquetTable` (preprocessing fitted by a pass, IDs streamed to PSI) reads no whole table."""

from __future__ import annotations

import torch
from conftest import make_views

from vsplit.app.local import run_sessions
from vsplit.app.session import Schedule, train_session
from vsplit.data.id_sources import ParquetIds
from vsplit.data.parquet_rows import ParquetRows
from vsplit.data.parquet_table import ParquetTable
from vsplit.party import FeatureParty, LabelParty, ModelSettings
from vsplit.topology import Topology


def train(views, *, stream_dir=None):
    bank = LabelParty("bank", views["bank"], label="y", seed=3)
    shop = FeatureParty("partner", views["partner"], seed=3)
    if stream_dir is not None:
        for party in (bank, shop):
            party.stream_from(stream_dir / f"{party.name}.parquet", cache_groups=2)
    return train_parties(bank, shop)


def train_parties(bank, shop):
    topology = Topology.vertical(label_party="bank", feature_parties=["partner"])
    schedule = Schedule(epochs=2, batch_size=64, seed=5)
    run_sessions({p.name: train_session(p, topology, schedule=schedule) for p in (bank, shop)}, session=b"p" * 16)
    return bank, shop


def test_training_from_parquet_batches_equals_training_in_memory_bit_for_bit(tmp_path, one_thread, monkeypatch):
    views = make_views(500, seed=4)
    for name, table in views.items():  # several row groups, so batches cross them and the cache evicts
        table.to_parquet(tmp_path / f"{name}.parquet", row_group_size=64)
    untrained = dict(FeatureParty("partner", views["partner"], seed=3).model.named_parameters())
    in_memory = train(views)
    reads = []
    read = ParquetRows._read
    monkeypatch.setattr(ParquetRows, "_read", lambda self, group: reads.append(group) or read(self, group))
    streamed = train(views, stream_dir=tmp_path)
    assert len(reads) > 2 * 8  # row groups were read again and again (2 cached of 8 per party)
    trained = dict(in_memory[1].model.named_parameters())
    assert not all(torch.equal(untrained[k], trained[k]) for k in trained)  # training moved the weights
    for kept, read in zip(in_memory, streamed, strict=True):
        params = [dict(m.named_parameters()) for m in (kept.model, *kept.segment_models.values())]
        others = [dict(m.named_parameters()) for m in (read.model, *read.segment_models.values())]
        assert params and all(p.keys() == o.keys() for p, o in zip(params, others, strict=True))
        for p, o in zip(params, others, strict=True):
            assert all(torch.equal(p[k], o[k]) for k in p)
    assert streamed[1].inputs[0].shape[0] == 0  # the streamed party holds no input tensors


def no_whole_table_reads(monkeypatch):
    """Make every call that reads a whole Parquet table fail (the dataset scanner reads batches: it is allowed)."""
    import pandas as pd
    import pyarrow.parquet as pq

    def refuse(*args, **kwargs):
        raise AssertionError("the whole table was read")

    for owner, name in [(pd, "read_parquet"), (pq, "read_table"), (pq.ParquetFile, "read"),
                        (pq.ParquetDataset, "read")]:
        monkeypatch.setattr(owner, name, refuse)


def test_parties_built_on_parquet_tables_train_as_in_memory_without_reading_a_whole_table(
        tmp_path, one_thread, monkeypatch):
    views = make_views(400, seed=6)
    views["partner"].loc[views["partner"].index[10:30], "spend"] = float("nan")  # holes: medians and flags
    for name, table in views.items():
        table.to_parquet(tmp_path / f"{name}.parquet", row_group_size=48)
    # numeric embeddings fit bins on rows in memory: a streamed party has none ("auto"), so neither has one here
    settings = ModelSettings(missing="impute", numeric_embedding="none")

    def parties(bank_table, partner_table):
        return (LabelParty("bank", bank_table, label="y", seed=3, settings=settings),
                FeatureParty("partner", partner_table, seed=3, settings=settings))

    in_memory = train_parties(*parties(views["bank"], views["partner"]))
    no_whole_table_reads(monkeypatch)
    reads = []
    read = ParquetRows._read
    monkeypatch.setattr(ParquetRows, "_read", lambda self, group: reads.append(self.groups) or read(self, group))
    streamed = parties(*(ParquetTable(tmp_path / f"{n}.parquet", cache_groups=2) for n in ("bank", "partner")))
    assert isinstance(streamed[1].ids, ParquetIds) and streamed[1].inputs[0].shape[0] == 0
    assert streamed[1].preprocessor.imputed_ == in_memory[1].preprocessor.imputed_ != {}
    train_parties(*streamed)
    assert reads and min(reads) > 2  # only single row groups of multi-group files were decoded, again and again
    for kept, read in zip(in_memory, streamed, strict=True):
        params = [dict(m.named_parameters()) for m in (kept.model, *kept.segment_models.values())]
        others = [dict(m.named_parameters()) for m in (read.model, *read.segment_models.values())]
        for p, o in zip(params, others, strict=True):
            assert p.keys() == o.keys() and all(torch.equal(p[k], o[k]) for k in p)
