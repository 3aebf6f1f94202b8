"""Secure aggregation inside the SplitFed and FedAvg schedules: the average is the exact dequantized weighted sum,
no masked update the federated server receives resembles the client's true one, and training still learns."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tests._horizontal_support import BATCH, data, horizontal, optimizer, run, segments
from vsplit.errors import ConfigError
from vsplit.federated.quantize import FixedPoint
from vsplit.federated.secagg_messages import MaskedInput
from vsplit.federated.secure_agg import plain_aggregate
from vsplit.horizontal import Settings
from vsplit.horizontal.averages import flatten, unflatten
from vsplit.horizontal.messages import SegmentState


def _tapped(settings: Settings, *, whole: bool = False):
    h, init, xy = horizontal("vanilla", (2,)), segments("vanilla", (2,)), data()
    frames: list = []
    out = run(h, settings, init, xy, optimizer("adam"), whole=whole,
              taps=[lambda src, dst, msg, frame: frames.append((src, dst, msg))])
    return h, xy, out, frames


@pytest.mark.parametrize("kind", ["splitfed_v1", "fedavg"])
def test_the_secure_average_is_the_exact_dequantized_weighted_sum(kind):
    plain = Settings(kind=kind, rounds=1, batch_size=BATCH, secure_aggregation="off")
    h, xy, out_plain, frames = _tapped(plain, whole=kind == "fedavg")
    # each client's state before the average: what it uploaded in the plain run (the round trains the same)
    uploads = {src: msg.arrays() for src, dst, msg in frames if isinstance(msg, SegmentState) and src in h.clients}
    assert set(uploads) == set(h.clients)
    vectors = {c: flatten(a)[0] for c, a in uploads.items()}
    layout = flatten(uploads[h.clients[0]])[1]
    rows = [len(xy[c][1]) for c in h.clients]
    exact = plain_aggregate([vectors[c] for c in h.clients], rows, FixedPoint()).mean
    want = unflatten(exact, layout)

    _, _, out_secure, secure_frames = _tapped(dataclasses.replace(plain, secure_aggregation="on"),
                                              whole=kind == "fedavg")
    assert not any(isinstance(m, SegmentState) and s in h.clients for s, _, m in secure_frames)  # nothing in clear
    segment = "bottom"
    for c in h.clients:
        got = out_secure[c].modules[segment].state_dict()
        floats = out_plain[c].modules[segment].state_dict()
        for key, value in got.items():
            name = f"w/{segment}/{key}" if f"w/{segment}/{key}" in want else f"b/{segment}/{key}"
            if name not in want:
                continue  # an integer buffer: kept by each client under secure aggregation
            assert torch.equal(value, torch.from_numpy(want[name])), (c, key)
            assert torch.allclose(value, floats[key], atol=len(h.clients) * 2.0**-20, rtol=0), (c, key)


def test_no_masked_update_resembles_the_clients_true_update():
    """Over 5 rounds and 3 clients (about 1,600 values): the masked vectors the federated server receives do not
    correlate with the true updates (|r| < 0.1, 4 standard errors of r at this size), and no quantized coordinate
    appears among them. The true updates of round r > 0 are taken from the same run without secure aggregation,
    which differs only by earlier rounds' fixed-point rounding."""
    settings = Settings(kind="splitfed_v1", rounds=5, batch_size=BATCH, secure_aggregation="off")
    h, xy, _, frames = _tapped(settings)
    true = {(src, msg.round): flatten(msg.arrays())[0] for src, dst, msg in frames
            if isinstance(msg, SegmentState) and src in h.clients}
    _, _, _, secure_frames = _tapped(dataclasses.replace(settings, secure_aggregation="on"))
    masked = {(src, msg.round): msg.values for src, dst, msg in secure_frames if isinstance(msg, MaskedInput)}
    assert set(masked) == set(true) and len(masked) == 15
    sent_all, true_all = [], []
    for (c, r), sent in masked.items():
        encoded = FixedPoint().encode(true[(c, r)], weight=len(xy[c][1])).view(np.int64)
        assert not np.array_equal(sent, encoded)
        if r == 0:  # the secure run's own update: none of its quantized coordinates is sent as it is
            assert not np.isin(encoded[:-1], sent).any()
        sent_all.append(sent[:-1].astype(np.float64))
        true_all.append(true[(c, r)])
    r = np.corrcoef(np.concatenate(sent_all), np.concatenate(true_all))[0, 1]
    assert abs(r) < 0.1, r


def test_splitfed_with_secure_aggregation_learns():
    settings = Settings(kind="splitfed_v2", rounds=6, batch_size=BATCH, secure_aggregation="on")
    h, _, out, _ = _tapped(settings)
    losses = [r["train_loss"] for r in out[h.server].history]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])


def test_secure_aggregation_settings_refuse_what_it_cannot_do():
    with pytest.raises(ConfigError, match="at least 3 clients"):
        Settings(kind="splitfed_v1", secure_aggregation="on").secure(2)
    with pytest.raises(ConfigError, match="optimizer state"):
        Settings(kind="splitfed_v1", secure_aggregation="on", optimizer_policy="average")
    with pytest.raises(ConfigError, match="sequential"):
        Settings(kind="sequential", secure_aggregation="on")
    assert not Settings(kind="splitfed_v1").secure(2) and Settings(kind="splitfed_v1").secure(3)
