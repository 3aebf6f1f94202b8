"""A side that loses the scalars of unfinished buckets redoes them with its peer, and the intersection is unchanged.

The scalar owner here is a stand-in for a Ray key ring on a dying node: it keeps its scalars in this process but,
on the calls a test picks, "loses" a bucket's scalar (renews it) and raises ScalarLost, as the Ray ring does when
an actor's node dies. Runs without Ray.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsplit.errors import ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.psi import IdPolicy, LabelParty, Partner, PsiConfig, SerialBackend
from vsplit.psi.keys import LocalKeys, ScalarLost
from vsplit.psi.messages import Blinded, Redo
from vsplit.runtime.psi import align_in_process

POLICY = IdPolicy(dedupe="first")


class _Lost:
    def __init__(self, bucket: int) -> None:
        self.bucket = bucket

    def result(self) -> np.ndarray:
        raise ScalarLost([self.bucket], why="test")


class FlakyKeys(LocalKeys):
    """Local scalars that are lost on the chosen submit calls (counted from 1)."""

    may_lose = True

    def __init__(self, buckets: int, lose_at: set[int], ahead: int) -> None:
        super().__init__(SerialBackend(), buckets)
        self.lose_at, self.calls, self.ahead = lose_at, 0, ahead

    def submit(self, bucket, points):
        self.calls += 1
        if self.calls in self.lose_at:
            self.renew([bucket])
            return _Lost(bucket)
        return super().submit(bucket, points)


class FlakyBackend:
    """Hands out FlakyKeys: the i-th key ring created (the label party's first) loses at ``plans[i]``."""

    def __init__(self, plans: list[set[int]], ahead: int = 3) -> None:
        self.plans, self.ahead, self.rings = plans, ahead, []

    def bucket_keys(self, buckets: int) -> FlakyKeys:
        plan = self.plans[len(self.rings)] if len(self.rings) < len(self.plans) else set()
        self.rings.append(FlakyKeys(buckets, plan, self.ahead))
        return self.rings[-1]


class Frames:
    def __init__(self) -> None:
        self.messages = []

    def __call__(self, sender, to, msg, frame) -> None:
        self.messages.append((sender, msg))


def shared(tables, *, config, backend=None, taps=()):
    out = align_in_process(tables, label_party="bank", config=config, backend=backend,
                           policies={n: POLICY for n in tables}, taps=taps)
    assert all(a.ids == out["bank"].ids for a in out.values())
    for name, values in tables.items():  # each party's rows point at its own copies of the shared IDs
        assert [str(v) for v in out[name].take(values)] == out["bank"].ids
    return sorted(out["bank"].ids)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bank=st.lists(st.integers(0, 80), min_size=1, max_size=60),
    shop=st.lists(st.integers(0, 80), min_size=1, max_size=60),
    buckets=st.integers(1, 5),
    chunk=st.sampled_from([8, 64]),
    reveal=st.sampled_from(["both", "label_party"]),
    bank_loses=st.sets(st.integers(1, 30), max_size=2),
    shop_loses=st.sets(st.integers(1, 30), max_size=2),
    on_disk=st.booleans(),
)
def test_lost_scalars_are_redone_and_the_intersection_is_unchanged(bank, shop, buckets, chunk, reveal, bank_loses,
                                                                   shop_loses, on_disk):
    if not set(bank) & set(shop):
        return
    tables = {"bank": bank, "shop": shop}
    config = PsiConfig(buckets=buckets, chunk=chunk, reveal=reveal, window=2, memory_budget_mb=int(on_disk))
    backend = FlakyBackend([bank_loses, shop_loses])
    assert shared(tables, config=config, backend=backend) == sorted(str(v) for v in set(bank) & set(shop))


def test_a_lost_bucket_is_announced_echoed_and_resent_in_full():
    bank = [f"c{i}" for i in range(400)]
    shop = [f"c{i}" for i in range(300, 700)]
    config = PsiConfig(buckets=4, chunk=64)
    tap = Frames()
    backend = FlakyBackend([{9}, set()])  # the bank loses a scalar at its 9th blinding
    assert shared({"bank": bank, "shop": shop}, config=config, backend=backend, taps=[tap]) == bank[300:]
    redos = [(s, m.bucket) for s, m in tap.messages if isinstance(m, Redo)]
    first = redos[0][1]
    assert redos == [("bank", first), ("shop", first)]  # asked once, echoed once
    assert backend.rings[0].calls > 9
    after = tap.messages.index(("shop", next(m for s, m in tap.messages if s == "shop" and isinstance(m, Redo))))
    resent = [m for s, m in tap.messages[after:] if s == "shop" and isinstance(m, Blinded)]
    assert resent[0].bucket == first and resent[0].index == first * 2  # the shop restarts at the bucket's start


def test_both_sides_losing_at_once_settle_on_the_lower_bucket():
    bank = [f"c{i}" for i in range(600)]
    shop = [f"c{i}" for i in range(200, 800)]
    config = PsiConfig(buckets=6, chunk=32)
    tap = Frames()
    backend = FlakyBackend([{12}, {7}])
    assert shared({"bank": bank, "shop": shop}, config=config, backend=backend, taps=[tap]) == sorted(bank[200:])
    assert sum(isinstance(m, Redo) for _, m in tap.messages) >= 2


def test_a_peer_that_never_said_it_could_lose_scalars_may_not_ask_for_a_redo():
    config = PsiConfig(buckets=2)
    bank = LabelParty([f"b{i}" for i in range(10)], partners=["shop"], config=config)
    shop = Partner(["b1"], label_party="bank", config=config)
    (hello,) = bank.start()
    shop.receive("bank", hello.message)
    with pytest.raises(ProtocolError, match="cannot lose scalars") as caught:
        shop.receive("bank", Redo(bucket=0))
    assert caught.value.code == AbortCode.PROTOCOL_VIOLATION
