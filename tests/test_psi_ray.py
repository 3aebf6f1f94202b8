"""PSI on the Ray backend: each bucket's scalar lives in a Ray actor; the result equals the one-process result,
nothing on the wire holds an ID or its unsalted hash, and killing one of two Ray nodes mid-run changes nothing.

One local Ray cluster (a head without CPUs and two worker nodes of one CPU each) serves the whole module.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_psi_privacy import Recorder, forbidden_forms

from vsplit.errors import AlignmentError
from vsplit.psi import IdPolicy, PsiConfig
from vsplit.psi.buckets import padded_size
from vsplit.psi.messages import Blinded, Redo
from vsplit.runtime.psi import align_in_process

ray = pytest.importorskip("ray", reason="the Ray extra is not installed: pip install 'vsplit[ray]'")
from ray.cluster_utils import Cluster  # noqa: E402

from vsplit.psi.ray_backend import RayBackend  # noqa: E402

POLICY = IdPolicy(dedupe="first")


@pytest.fixture(scope="module")
def cluster():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster, nodes
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def backends(cluster):
    """One backend per party, two actors each (half a CPU per actor: four actors on the two CPUs)."""
    made = [RayBackend(workers=2, num_cpus=0.5, ahead=4) for _ in range(2)]
    yield made
    for backend in made:
        backend.close()


class PerParty:
    """Gives each party's machine its own backend (align_in_process shares one): the bank's first, then the shop's."""

    def __init__(self, backends) -> None:
        self._backends, self._made = backends, 0

    def bucket_keys(self, buckets):
        backend = self._backends[min(self._made, len(self._backends) - 1)]
        self._made += 1
        return backend.bucket_keys(buckets)


def aligned(tables, *, config, backend=None, taps=()):
    try:
        out = align_in_process(tables, label_party="bank", config=config, backend=backend,
                               policies={name: POLICY for name in tables}, taps=taps)
    except AlignmentError:
        return None
    assert all(a.ids == out["bank"].ids for a in out.values())
    return sorted(out["bank"].ids)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    bank=st.lists(st.integers(0, 60), max_size=40),
    shop=st.lists(st.integers(0, 60), max_size=40),
    buckets=st.integers(2, 5),
    reveal=st.sampled_from(["both", "label_party"]),
)
def test_bucketed_psi_on_ray_equals_unbucketed_psi_in_one_process(backends, bank, shop, buckets, reveal):
    tables = {"bank": bank, "shop": shop}
    plain = aligned(tables, config=PsiConfig(reveal=reveal))
    config = PsiConfig(reveal=reveal, buckets=buckets, chunk=16)
    assert aligned(tables, config=config, backend=PerParty(backends)) == plain


def test_on_ray_no_frame_holds_an_id_and_every_bucket_has_the_padded_size(backends):
    bank = [f"customer-{i:05d}@bank.example" for i in range(300)]
    shop = [f"customer-{i:05d}@bank.example" for i in range(200, 360)]
    tap = Recorder()
    config = PsiConfig(buckets=4, chunk=50)
    assert aligned({"bank": bank, "shop": shop}, config=config, backend=PerParty(backends), taps=[tap]) == bank[200:]
    wire = b"".join(frame for *_, frame in tap.frames)
    for value in set(bank) | set(shop):
        for form in forbidden_forms(value):
            assert form not in wire, f"{value!r} leaked"
    for sender, n in (("bank", 300), ("shop", 160)):
        per_bucket = Counter()
        for s, _, m, _ in tap.frames:
            if s == sender and isinstance(m, Blinded):
                per_bucket[m.bucket] += len(m.points)
        assert dict(per_bucket) == {k: padded_size(n, buckets=4) for k in range(4)}


def test_killing_one_of_two_ray_nodes_mid_run_leaves_the_intersection_unchanged(cluster, backends):
    bank = [f"c{i}" for i in range(3000)]
    shop = [f"c{i}" for i in range(1000, 4000)]
    config = PsiConfig(buckets=8, chunk=128)
    expected = aligned({"bank": bank, "shop": shop}, config=PsiConfig())
    _, nodes = cluster
    tap = Recorder()
    killed = []

    def kill_after_six_chunks(sender, to, msg, frame):
        tap(sender, to, msg, frame)
        sent = sum(1 for s, _, m, _ in tap.frames if s == "bank" and isinstance(m, Blinded))
        if sent == 6 and not killed:
            cluster[0].remove_node(nodes[1])
            killed.append(time.perf_counter())

    assert aligned({"bank": bank, "shop": shop}, config=config, backend=PerParty(backends),
                   taps=[kill_after_six_chunks]) == expected
    assert killed and any(isinstance(m, Redo) for *_, m, _ in tap.frames)  # a node died and a bucket was redone
    assert any(len(b.alive()) == 1 for b in backends)  # a party lost the actor it had on that node
