"""Exact integrated gradients of piecewise-linear split models: each row's path split at its breakpoints.

The oracle is completeness: the attributions of every column of every party of a row sum to ``F(x) - F(b)`` up to
float64 rounding (the quadrature only gets there as its nodes grow, and agrees with the exact value as they do). The
breakpoints are checked independently: the network is affine on every piece they leave. A segment that is not
piecewise linear falls back to the quadrature with a note, or is refused when exact is demanded; the new messages
validate themselves and a mangled frame is refused cleanly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_explain import make_views
from torch import nn

from vsplit.errors import ConfigError, ProtocolError, VsplitError
from vsplit.estimator import SplitClassifier
from vsplit.explain.knots import KnotLimit, Knots, gather_pieces, interpolate, not_piecewise_linear, refine
from vsplit.explain.messages import MAX_KNOTS, ExplainRequest, KnotActivations, PieceGradients
from vsplit.protocol.abort import AbortCode
from vsplit.transport import codec

SESSION = bytes(16)


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 12), nn.ReLU(), nn.Linear(12, 12), nn.LeakyReLU(0.1), nn.Linear(12, 2)).double()


def test_the_breakpoints_leave_the_network_affine_on_every_piece():
    net = _net(0)
    start, end = torch.randn(4, 3, dtype=torch.float64) * 3, torch.randn(4, 3, dtype=torch.float64) * 3

    def at(alphas: np.ndarray, rows: np.ndarray) -> torch.Tensor:
        a = torch.from_numpy(alphas)[:, None]
        return net(start[rows] + a * (end - start)[rows])

    knots, out = refine(at, net, Knots.ends(4))
    assert knots.counts.min() > 2  # every row crosses some switch
    for fraction in (0.13, 0.5, 0.91):  # inside every piece, the network equals the interpolation of its knots
        i = knots.left()
        inside = knots.alphas[i] + fraction * (knots.alphas[i + 1] - knots.alphas[i])
        rows = knots.rows[i]
        with torch.no_grad():
            np.testing.assert_allclose(at(inside, rows).numpy(), interpolate(knots, out, inside, rows).numpy(),
                                       atol=1e-10)
    dense = np.linspace(0, 1, 20001)  # and no switch is left out: the sign pattern changes only at knots
    for row in range(4):
        with torch.no_grad():
            h = net[1](net[0](start[row] + torch.from_numpy(dense)[:, None] * (end - start)[row]))
        switches = dense[1:][(np.diff((h > 0).numpy(), axis=0) != 0).any(axis=1)]
        mine = knots.alphas[knots.offsets[row]:knots.offsets[row + 1]]
        assert all(np.abs(mine - s).min() <= 1 / 20000 for s in switches)


def test_pieces_sum_into_the_coarser_knots_they_refine():
    coarse = Knots.from_counts(np.array([0.0, 1.0, 0.0, 0.5, 1.0]), np.array([2, 3]))
    fine = coarse.union(Knots.from_counts(np.array([0.0, 0.25, 1.0, 0.0, 0.75, 1.0]), np.array([3, 3])))
    assert fine.alphas.tolist() == [0.0, 0.25, 1.0, 0.0, 0.5, 0.75, 1.0]
    np.testing.assert_allclose(fine.lengths(), [0.25, 0.75, 0.5, 0.25, 0.25])
    summed = gather_pieces(fine, coarse, torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0]], dtype=torch.float64))
    assert summed.ravel().tolist() == [3.0, 3.0, 9.0]


def test_a_row_with_too_many_breakpoints_is_refused_with_the_fix():
    net = _net(1)
    x = torch.randn(2, 3, dtype=torch.float64) * 5
    with pytest.raises(KnotLimit, match="method='quadrature'"):
        refine(lambda alphas, rows: net(torch.from_numpy(alphas)[:, None] * x[rows]), net, Knots.ends(2),
               max_knots=2)


@pytest.fixture(scope="module")
def views():
    return make_views(n=300, seed=1)


def _fit(topology: str, views) -> tuple[SplitClassifier, dict]:
    if topology == "u_shaped":
        data = {"bank": views["bank"]}
    elif topology == "vanilla":
        data = {"bank": views["bank"][["customer_id", "y"]], "shop": views["shop"]}
    else:
        data = views
    clf = SplitClassifier(topology=topology, epochs=2, random_state=0, alignment="join", candidates="network",
                          **({"merge": "sum"} if topology == "vertical" else {}))
    return clf.fit(data), data


@pytest.mark.parametrize("topology", ["vertical", "vanilla", "u_shaped"])
def test_exact_attributions_add_up_to_the_score_difference_in_every_topology(topology, views):
    clf, data = _fit(topology, views)
    exact = clf.explain(data, chunk=128)
    assert exact.method == "exact" and exact.note == "" and exact.knots.min() > 2
    assert exact.completeness_error().max() < 1e-9  # float64 rounding, not a quadrature error
    fine = clf.explain(data, method="quadrature", steps=128)
    assert fine.completeness_error().max() > exact.completeness_error().max()
    np.testing.assert_allclose(fine.features.to_numpy(), exact.features.to_numpy(), atol=2e-3)
    np.testing.assert_allclose(fine.groups.to_numpy(), exact.groups.to_numpy(), atol=2e-3)
    for name, mine in exact.partners.items():  # the group a partner reports is the sum of the columns it keeps
        np.testing.assert_allclose(mine.to_numpy().sum(axis=1), exact.groups[name].to_numpy(), atol=1e-12)
    assert "exact integrated gradients" in exact.method_text()


def test_piecewise_linear_numeric_embeddings_are_integrated_exactly_too(views):
    clf = SplitClassifier(epochs=1, random_state=0, alignment="join", numeric_embedding="piecewise",
                          candidates="network").fit(views)
    exact = clf.explain(views)  # the kinks where a column crosses one of its bin edges are breakpoints as well
    assert exact.method == "exact" and exact.completeness_error().max() < 1e-9
    fine = clf.explain(views, method="quadrature", steps=128)
    np.testing.assert_allclose(fine.features.to_numpy(), exact.features.to_numpy(), atol=2e-3)


def test_a_segment_that_is_not_piecewise_linear_falls_back_to_the_quadrature_and_says_so(views):
    clf = SplitClassifier(epochs=1, random_state=0, alignment="join", merge="attention",
                          candidates="network").fit(views)
    e = clf.explain(views, steps=16)
    assert e.method == "quadrature" and "Attention" in e.note and "not exact" in e.method_text()
    with pytest.raises(ConfigError, match=r"piecewise linear.*method=.quadrature."):
        clf.explain(views, method="exact")
    assert not_piecewise_linear(nn.Sequential(nn.Linear(2, 2), nn.ReLU())) is None


def test_a_partner_asked_for_exact_with_a_curved_segment_refuses_naming_the_fix(views):
    from vsplit.explain.session import explain_machine

    clf, _ = _fit("vertical", views)
    party = clf.feature_parties_["shop"]
    machine = explain_machine(party, clf.topology_, party.rows_of(np.arange(5)), n_rows=5)
    machine.modules["shop"] = nn.Sequential(machine.modules["shop"], nn.GELU())
    request = ExplainRequest(n_rows=5, chunk=5, steps=4, topology=clf.topology_.view_fingerprint("shop"),
                             method="exact")
    with pytest.raises(ProtocolError, match=r"GELU.*quadrature") as caught:
        machine.receive("bank", request)
    assert caught.value.code == AbortCode.CONFIG_MISMATCH


def _knots(counts=(3, 2)) -> KnotActivations:
    alphas = np.concatenate([np.linspace(0, 1, c) for c in counts])
    return KnotActivations(cut=1, chunk=0, counts=np.array(counts, np.int32), alphas=alphas,
                           values=np.arange(2 * len(alphas), dtype=np.float64).reshape(-1, 2))


def test_knot_messages_round_trip_and_refuse_what_breaks_their_shape():
    for msg in (_knots(), PieceGradients(cut=1, chunk=0, values=np.ones((3, 2)))):
        _, back = codec.decode(codec.encode(msg, session=SESSION, seq=1))
        assert type(back) is type(msg)
        for name in ("values", "alphas", "counts"):
            if hasattr(msg, name):
                np.testing.assert_array_equal(getattr(back, name), getattr(msg, name))
    good = _knots()
    bad = {
        "a row with one knot": dict(counts=np.array([1, 4], np.int32)),
        "too many knots": dict(counts=np.array([MAX_KNOTS + 1, 2], np.int32)),
        "decreasing": dict(alphas=np.array([0.0, 0.7, 0.6, 0.0, 1.0])),
        "not from 0": dict(alphas=np.array([0.1, 0.5, 1.0, 0.0, 1.0])),
        "not to 1": dict(alphas=np.array([0.0, 0.5, 1.0, 0.0, 0.9])),
        "NaN": dict(values=np.full((5, 2), np.nan)),
        "float32": dict(values=good.values.astype(np.float32)),
        "a knot short": dict(values=good.values[:4]),
    }
    for why, change in bad.items():
        fields = {"cut": 1, "chunk": 0, "counts": good.counts, "alphas": good.alphas, "values": good.values,
                  **change}
        with pytest.raises(ProtocolError):
            KnotActivations(**fields)
            pytest.fail(why)
    with pytest.raises(ProtocolError):
        PieceGradients(cut=1, chunk=0, values=np.ones((3, 2), np.float32))
    with pytest.raises(ProtocolError, match="method"):
        ExplainRequest(n_rows=1, chunk=1, steps=1, topology="x", method="simpson")


SEEDS = [bytes(codec.encode(m, session=SESSION, seq=3)) for m in
         (_knots(), _knots((2, 4, 2)), PieceGradients(cut=2, chunk=1, values=np.ones((4, 3))),
          ExplainRequest(n_rows=9, chunk=4, steps=8, topology="ab", method="exact"))]


@given(seed=st.sampled_from(SEEDS), at=st.integers(0, 400), byte=st.integers(0, 255), cut=st.integers(0, 400))
@settings(max_examples=200, deadline=5000, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_a_mangled_knot_frame_decodes_to_a_valid_message_or_is_refused(seed, at, byte, cut):
    data = bytearray(seed)
    if at < len(data):
        data[at] = byte
    if cut < len(seed) // 2:  # truncated
        del data[max(cut, 1):]
    try:
        _, msg = codec.decode(bytes(data))
    except VsplitError:
        return
    assert isinstance(msg, (KnotActivations, PieceGradients, ExplainRequest))
