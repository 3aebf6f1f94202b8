"""Explanations of a split model: integrated gradients through the cuts, each party computing its own columns' share.

The oracle: the split explanation equals Captum's integrated gradients on the same network in one place (same
baselines, same nodes). The privacy boundary: no frame carries a partner's per-feature attributions, and its column
names only where its config allows. Vertical, vanilla and U-shaped splits all explain.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _leaks import leaks

from vsplit.estimator import SplitClassifier
from vsplit.explain.messages import (
    ExplainRequest,
    GroupAttribution,
    KnotActivations,
    PathActivations,
    PathGradients,
    PieceGradients,
)
from vsplit.explain.paths import Baseline
from vsplit.explain.reference import captum_attributions
from vsplit.explain.session import input_columns

STEPS = 24


def make_views(n: int = 500, seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = [f"c{i:04d}" for i in range(n)]
    age, x, z = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    job = rng.choice(["clerk", "manager", "student"], n)
    logit = 1.5 * x - age + (job == "manager") + 0.5 * z
    y = (logit + rng.normal(scale=0.5, size=n) > 0).astype(int)
    bank = pd.DataFrame({"customer_id": ids, "age": age, "job": job, "y": y})
    shop = pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1], "z": z[::-1], "w": rng.normal(size=n)})
    return {"bank": bank, "shop": shop}


@pytest.fixture(scope="module")
def views() -> dict[str, pd.DataFrame]:
    return make_views()


@pytest.fixture(scope="module")
def vertical(views) -> SplitClassifier:
    return SplitClassifier(epochs=3, random_state=0, alignment="join", candidates="network").fit(views)


def test_split_attributions_equal_captum_on_the_same_network_in_one_place(vertical, views):
    e = vertical.explain(views, steps=STEPS, method="quadrature")
    parties = {"bank": vertical.label_party_, "shop": vertical.feature_parties_["shop"]}
    bottoms = {}
    for name, party in parties.items():
        ids, (cat, num) = party.prepare(views[name])
        order = np.argsort(ids, kind="stable")
        rows = (cat[order], num[order])
        module = vertical.modules_[name]
        bottoms[name] = (module, rows, Baseline.fit(module, party.inputs))
    top = vertical.modules_["top"]
    expected = captum_attributions(bottoms, lambda emb: top(emb), steps=STEPS)
    bank_columns = input_columns(vertical.label_party_)
    assert list(e.features.columns) == list(dict.fromkeys(bank_columns)) == ["job", "age"]
    np.testing.assert_allclose(e.features.to_numpy(), expected["bank"], atol=2e-5)
    np.testing.assert_allclose(e.partners["shop"].to_numpy(), expected["shop"], atol=2e-5)


def test_the_partner_group_is_the_sum_of_its_columns_and_completeness_improves_with_steps(vertical, views):
    coarse, fine = vertical.explain(views, steps=4, method="quadrature"), \
        vertical.explain(views, steps=64, method="quadrature")
    np.testing.assert_allclose(fine.partners["shop"].to_numpy().sum(axis=1), fine.groups["shop"], atol=1e-9)
    assert fine.completeness_error().mean() < coarse.completeness_error().mean() / 4
    assert fine.completeness_error().max() < 0.05
    proba = vertical.predict_proba(views)[:, 1]
    by_id = dict(zip(views["bank"]["customer_id"], proba, strict=True))
    np.testing.assert_allclose(1 / (1 + np.exp(-fine.score)), [by_id[i] for i in fine.ids], atol=1e-5)


def _partner_values(frames, party: str) -> list[object]:
    return [m for sender, _, m, _ in frames if sender == party]


@pytest.mark.parametrize("share", [0, 2])
def test_no_frame_carries_a_partners_per_feature_attributions_and_names_only_if_allowed(vertical, views, frames,
                                                                                      share):
    e = vertical.explain(views, steps=8, chunk=128, share_top_k=share)
    sent = _partner_values(frames, "shop")
    groups = [m for m in sent if isinstance(m, GroupAttribution)]
    assert groups and {type(m) for m in sent} <= {GroupAttribution, KnotActivations, *_psi_types(sent)}
    assert all(m.top.shape[1] == share for m in groups)
    assert all(bool(m.names) == bool(share) for m in groups)
    values = e.partners["shop"].to_numpy()[:50].ravel()
    for msg, frame in ((m, f) for s, _, m, f in frames if s == "shop"):  # neither as float64 nor as float32
        assert not leaks(msg, frame, values)
    if share:
        assert set(e.top) == {"shop"} and len(e.top["shop"]) == len(e.ids)
        strongest = e.partners["shop"].abs().to_numpy().argmax(axis=1)
        assert [row[0] for row in e.top["shop"]] == [e.partners["shop"].columns[i] for i in strongest]
    else:
        assert e.top == {}


def _psi_types(messages) -> set[type]:
    return {type(m) for m in messages if type(m).__module__.startswith("vsplit.psi")}


def test_a_vanilla_split_attributes_everything_to_the_client_group(views):
    bank = views["bank"][["customer_id", "y"]]
    clf = SplitClassifier(topology="vanilla", epochs=2, random_state=0, alignment="join")
    both = {"bank": bank, "shop": views["shop"]}
    e = clf.fit(both).explain(both, steps=32)
    assert list(e.features.columns) == [] and list(e.groups.columns) == ["shop"]
    assert e.method == "exact" and e.completeness_error().max() < 1e-9
    np.testing.assert_allclose(e.partners["shop"].to_numpy().sum(axis=1), e.groups["shop"], atol=1e-9)


def test_a_u_shaped_split_explains_at_the_client_and_the_server_learns_nothing_new(views, frames):
    own = views["bank"]
    clf = SplitClassifier(topology="u_shaped", epochs=2, random_state=0).fit({"bank": own})
    frames.clear()
    e = clf.explain({"bank": own}, method="quadrature")
    assert list(e.features.columns) == ["job", "age"] and e.groups.shape[1] == 0
    assert e.completeness_error().max() < 0.05
    to_server = {type(m) for _, to, m, _ in frames if to == "server"}
    from_server = {type(m) for s, _, m, _ in frames if s == "server"}
    # the server sees what training shows it (the head's outputs, gradients of its own outputs), never a score,
    # an attribution or a row count beyond the request
    assert to_server == {ExplainRequest, PathActivations, PathGradients}
    assert from_server == {PathActivations, PathGradients}
    frames.clear()  # exact: the same, with each row's knots in place of shared nodes
    exact = clf.explain({"bank": own})
    assert exact.method == "exact" and exact.completeness_error().max() < 1e-9
    assert {type(m) for _, to, m, _ in frames if to == "server"} == {ExplainRequest, KnotActivations, PieceGradients}
    assert {type(m) for s, _, m, _ in frames if s == "server"} == {KnotActivations, PieceGradients}


def test_a_centralized_baseline_explains_the_same_columns_in_one_place(views):
    central = SplitClassifier(mode="centralized", epochs=3, random_state=0, alignment="join").fit(views)
    split = SplitClassifier(epochs=3, random_state=0, alignment="join", candidates="network").fit(views)
    a, b = central.explain(views, steps=16), split.explain(views, steps=16)
    assert list(a.features.columns) == list(b.features.columns)
    np.testing.assert_allclose(a.partners["shop"].to_numpy(), b.partners["shop"].to_numpy(), atol=1e-4)
    np.testing.assert_allclose(a.features.to_numpy(), b.features.to_numpy(), atol=1e-4)


def test_a_request_beyond_the_memory_bound_or_from_a_stranger_is_refused(vertical):
    from vsplit.errors import ProtocolError
    from vsplit.explain.session import explain_machine

    with pytest.raises(ProtocolError, match="path rows"):
        ExplainRequest(n_rows=10, chunk=60_000, steps=32, topology="x")  # 2 million path rows
    party = vertical.feature_parties_["shop"]
    machine = explain_machine(party, vertical.topology_, party.rows_of(np.arange(5)), n_rows=5)
    request = ExplainRequest(n_rows=5, chunk=5, steps=4, topology=vertical.topology_.view_fingerprint("shop"))
    with pytest.raises(ProtocolError, match="not a peer"):
        machine.receive("telco", request)
    with pytest.raises(ProtocolError, match="another topology"):
        machine.receive("bank", ExplainRequest(n_rows=5, chunk=5, steps=4, topology="0" * 16))
