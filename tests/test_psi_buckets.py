"""Bucketed PSI finds exactly what unbucketed PSI finds, and on the wire every bucket has the padded public size."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsplit.data.id_sources import as_source
from vsplit.errors import AlignmentError, ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.psi import CsvIds, IdPolicy, LabelParty, Partner, ProcessBackend, PsiConfig
from vsplit.psi.buckets import GRANULE, padded_size
from vsplit.psi.messages import Blinded, Doubled
from vsplit.psi.prepare import prepare_ids
from vsplit.runtime.psi import align_in_process

POLICY = IdPolicy(dedupe="first")
ID = st.integers(0, 60)


@pytest.fixture(scope="module")
def pool():
    with ProcessBackend(workers=2, min_split=1) as backend:
        yield backend


def aligned(tables, *, config, backend=None, taps=()):
    policies = {name: POLICY for name in tables}
    try:
        return align_in_process(tables, label_party="bank", config=config, policies=policies, backend=backend,
                                taps=taps)
    except AlignmentError:
        return None


def shared_ids(out) -> list[str] | None:
    if out is None:
        return None
    order = out["bank"].ids
    assert all(alignment.ids == order for alignment in out.values())  # one agreed order for every party
    return sorted(order)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bank=st.lists(ID, max_size=40),
    shop=st.lists(ID, max_size=40),
    telco=st.none() | st.lists(ID, max_size=30),
    buckets=st.integers(2, 5),
    reveal=st.sampled_from(["both", "label_party"]),
    chunk=st.sampled_from([7, 64, 1000]),
)
def test_bucketed_psi_equals_unbucketed_psi_on_random_sets(bank, shop, telco, buckets, reveal, chunk):
    tables = {"bank": bank, "shop": shop} | ({} if telco is None else {"telco": telco})
    plain = shared_ids(aligned(tables, config=PsiConfig(reveal=reveal)))
    bucketed = aligned(tables, config=PsiConfig(reveal=reveal, buckets=buckets, chunk=chunk))
    assert shared_ids(bucketed) == plain
    if bucketed is not None:
        for name, values in tables.items():  # each party's rows point at its own copies of the shared IDs
            assert [str(v) for v in bucketed[name].take(values)] == bucketed["bank"].ids


def test_bucketed_psi_on_the_process_backend_equals_serial(pool):
    bank = [f"id{i}" for i in range(900)]
    shop = [f"id{i}" for i in range(600, 1500)]
    config = PsiConfig(buckets=4, chunk=100)
    parallel = aligned({"bank": bank, "shop": shop}, config=config, backend=pool)
    assert shared_ids(parallel) == shared_ids(aligned({"bank": bank, "shop": shop}, config=PsiConfig()))
    assert shared_ids(parallel) == sorted(bank[600:])


class Frames:
    def __init__(self) -> None:
        self.messages: list[tuple[str, object, bytes]] = []

    def __call__(self, sender, to, msg, frame) -> None:
        self.messages.append((sender, msg, bytes(frame)))


@pytest.mark.parametrize("buckets", [3, 8])
def test_every_bucket_on_the_wire_has_the_padded_public_size(buckets):
    sizes = {"bank": 500, "shop": 120}
    tables = {"bank": [f"c{i}" for i in range(500)], "shop": [f"c{i}" for i in range(450, 570)]}
    tap = Frames()
    out = aligned(tables, config=PsiConfig(buckets=buckets, chunk=50), taps=[tap])
    assert shared_ids(out) == sorted(f"c{i}" for i in range(450, 500))
    for sender, n in sizes.items():
        blinded = [m for s, m, _ in tap.messages if s == sender and isinstance(m, Blinded)]
        per_bucket = Counter()
        for m in blinded:
            per_bucket[m.bucket] += len(m.points)
        size = padded_size(n, buckets=buckets)
        assert dict(per_bucket) == {k: size for k in range(buckets)}
        assert {m.total for m in blinded} == {buckets * size}
        answered = Counter()
        for s, m, _ in tap.messages:
            if s != sender and isinstance(m, Doubled):
                answered[m.bucket] += len(m.points)
        assert answered == per_bucket  # the peer answers every bucket of this side, tagged the same


def test_bucket_sizes_reveal_nothing_about_which_bucket_holds_more():
    ids = [f"c{i}" for i in range(1000)]
    ready = prepare_ids(as_source(ids), policy=POLICY, salt=bytes(32), label=b"L", buckets=4)
    assert len(set(ready.counts.tolist())) > 1  # the real buckets differ...
    assert ready.size == padded_size(1000, buckets=4) and ready.size % GRANULE == 0
    orders = [ready.bucket(k)[0] for k in range(4)]
    assert [len(o) for o in orders] == [ready.size] * 4  # ...the padded ones do not
    assert [int((o >= 0).sum()) for o in orders] == ready.counts.tolist()
    assert sorted(r for o in orders for r in o.tolist() if r >= 0) == list(range(1000))
    assert not any((o[-GRANULE:] < 0).all() for o in orders)  # dummies are mixed in, not stacked at the end


class Unsized:
    """An ID source that cannot say its size (as a CSV file cannot), so a memory budget always spills it."""

    def __init__(self, ids):
        self._inner = as_source(ids)
        self.name = "unsized"

    def batches(self, size):
        return self._inner.batches(size)

    def size_hint(self):
        return None

    def values_at(self, rows):
        return self._inner.values_at(rows)


@pytest.mark.parametrize("spill", [False, True])
def test_duplicates_are_found_bucket_by_bucket_in_memory_or_spilled(spill):
    ids = [f"c{i % 300}" for i in range(400)]  # rows 300..399 repeat rows 0..99
    ready = prepare_ids(Unsized(ids) if spill else as_source(ids), policy=POLICY, salt=bytes(32), label=b"L",
                        buckets=5, memory_budget_mb=1)
    assert ready.store.spilled is spill  # a source with a size hint that fits the budget stays in memory
    assert (ready.rows_read, ready.duplicates, ready.distinct) == (400, 100, 300)
    kept = sorted(r for k in range(5) for r in ready.bucket(k)[0].tolist() if r >= 0)
    assert kept == list(range(300))


def test_a_party_over_its_memory_budget_spills_its_buckets_and_finds_the_same_overlap(tmp_path):
    bank = [f"c{i}" for i in range(3000)]
    shop = [f"c{i}" for i in range(2000, 2600)]
    (tmp_path / "bank.csv").write_text("id\n" + "\n".join(bank) + "\n")
    source = CsvIds(tmp_path / "bank.csv", column="id")
    assert source.size_hint() is None  # so a budget spills it
    config = PsiConfig(buckets=3, memory_budget_mb=1, chunk=256)
    out = aligned({"bank": source, "shop": shop}, config=config)
    assert sorted(out["shop"].ids) == sorted(shop)
    assert sorted(out["bank"].rows.tolist()) == list(range(2000, 2600))


def test_parties_with_different_bucket_counts_are_refused():
    bank = LabelParty(["a", "b"], partners=["shop"], config=PsiConfig(buckets=2))
    shop = Partner(["a"], label_party="bank", config=PsiConfig(buckets=4))
    (bank_hello,) = bank.start()
    with pytest.raises(ProtocolError, match="into 2 buckets, this side into 4") as caught:
        shop.receive("bank", bank_hello.message)
    assert caught.value.code == AbortCode.CONFIG_MISMATCH


def past_hello(config: PsiConfig) -> Partner:
    bank = LabelParty([f"b{i}" for i in range(10)], partners=["shop"], config=config)
    shop = Partner(["b1"], label_party="bank", config=config)
    (bank_hello,) = bank.start()
    shop.receive("bank", bank_hello.message)
    return shop


def test_a_peer_that_starts_a_bucket_before_filling_the_last_is_refused():
    shop = past_hello(PsiConfig(buckets=2, chunk=64))
    with pytest.raises(ProtocolError, match="padded bucket layout") as caught:
        shop.receive("bank", Blinded(index=0, total=128, points=np.full((32, 32), 9, np.uint8), bucket=1))
    assert caught.value.code == AbortCode.PROTOCOL_VIOLATION


def test_a_peer_whose_total_does_not_split_into_equal_buckets_is_refused():
    shop = past_hello(PsiConfig(buckets=2, chunk=64))
    with pytest.raises(ProtocolError, match="not a multiple of its 2 buckets"):
        shop.receive("bank", Blinded(index=0, total=127, points=np.full((63, 32), 9, np.uint8)))
