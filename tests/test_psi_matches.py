"""The matches on disk (under a memory budget) give the alignment the in-memory path gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsplit.errors import DataError
from vsplit.psi import IdPolicy, PsiConfig
from vsplit.psi.matches import MatchStore, agreed_order
from vsplit.runtime.psi import align_in_process, load_rows, save_rows

ID = st.integers(0, 80)


def rows_by_id(out) -> dict[str, list[int]]:
    """Each party's rows keyed by the agreed IDs, so two runs (with different scalars, so orders) compare."""
    order = out["bank"].ids
    assert all(a.ids == order for a in out.values())  # one agreed order for every party
    assert all(a.rows.dtype == np.int64 for a in out.values())
    return {name: sorted(zip(a.ids, a.rows.tolist(), strict=True)) for name, a in out.items()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bank=st.lists(ID, min_size=1, max_size=50, unique=True),
    shop=st.lists(ID, min_size=1, max_size=50, unique=True),
    telco=st.none() | st.lists(ID, min_size=1, max_size=40, unique=True),
    buckets=st.integers(1, 4),
    reveal=st.sampled_from(["both", "label_party"]),
)
def test_the_on_disk_matches_give_the_in_memory_alignment(bank, shop, telco, buckets, reveal):
    tables = {"bank": [*bank, 1000], "shop": [*shop, 1000]} | ({} if telco is None else {"telco": [*telco, 1000]})
    policies = {name: IdPolicy() for name in tables}
    runs = [
        align_in_process(tables, label_party="bank", policies=policies,
                         config=PsiConfig(reveal=reveal, buckets=buckets, chunk=8, memory_budget_mb=budget))
        for budget in (0, 1)
    ]
    assert rows_by_id(runs[0]) == rows_by_id(runs[1])


def test_agreed_order_from_keys_equals_the_byte_order_even_when_prefixes_tie():
    values = np.random.default_rng(3).integers(0, 256, (3000, 32), dtype=np.uint8)
    values[:1000, :8] = values[1000:2000, :8]  # a thousand pairs of equal 8-byte prefixes
    values[2000:2010, :31] = values[2010:2020, :31]  # and some equal up to the last byte
    expected = np.argsort(values.view("V32").ravel(), kind="stable")
    assert np.array_equal(agreed_order(values), expected)
    store = MatchStore(spill=True)
    store.add(0, values, np.arange(3000), np.arange(3000))
    found = store.finish()
    store.close()
    assert isinstance(found.values, np.memmap)
    assert np.array_equal(agreed_order(found.values, keys=found.keys), expected)


def test_a_redo_truncates_the_log_alike_in_memory_and_on_disk():
    rng = np.random.default_rng(4)
    logs = [MatchStore(spill=False), MatchStore(spill=True)]
    batches = [(b, rng.integers(0, 256, (n, 32), dtype=np.uint8), rng.integers(0, 99, n), rng.integers(0, 99, n))
               for b, n in [(0, 3), (0, 2), (1, 4), (2, 1)]]
    for log in logs:
        for batch in batches[:3]:
            log.add(*batch)
        log.truncate(1)  # bucket 1 is voided ...
        log.add(*batches[2])  # ... and redone, then bucket 2
        log.add(*batches[3])
    memory, disk = (log.finish() for log in logs)
    assert memory.own.tolist() == disk.own.tolist() == np.concatenate([b[2] for b in batches]).tolist()
    assert np.array_equal(memory.values, disk.values) and np.array_equal(memory.peer, disk.peer)
    assert memory.keys.tolist() == disk.keys.tolist()


def test_aligned_rows_saved_atomically_come_back_memory_mapped(tmp_path):
    out = align_in_process({"bank": list(range(0, 300, 2)), "shop": list(range(0, 300, 3))}, label_party="bank",
                           config=PsiConfig(buckets=2, memory_budget_mb=1))
    path = save_rows(out["shop"], tmp_path / "run" / "shop.rows.npy")
    rows = load_rows(path)
    assert isinstance(rows, np.memmap) and np.array_equal(rows, out["shop"].rows)
    assert [i * 3 for i in rows.tolist()] == [int(v) for v in out["bank"].ids]
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    np.save(tmp_path / "floats.npy", np.zeros(3))
    with pytest.raises(DataError, match="not aligned rows"):
        load_rows(tmp_path / "floats.npy")
