"""Early stopping on the bank's held-out rows, around the training machines (in one process, memory channels): the
run stops at the first tree ``rounds`` past the best validation log loss, keeps the best prefix (equal to the pooled
trees of that many trees), and the partner keeps only the records those trees use, so one-round prediction works."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("heu")

from vsplit.boosting import (
    BoostParams,
    LabelBoost,
    LabelPredict,
    PartnerBoost,
    PartnerModel,
    PartnerPredict,
    fit_bins,
    fit_pooled,
)
from vsplit.boosting.early import StoppingLabel, StoppingPartner, first_stop, log_loss
from vsplit.boosting.gains import goes_left
from vsplit.he import generate_keypair
from vsplit.runtime.inprocess import connect, run_machines

pytestmark = pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning")
PARAMS = BoostParams(trees=10, max_depth=3, learning_rate=0.5, min_child_weight=0.5)


def test_stops_after_rounds_without_gain_and_keeps_the_best_pooled_prefix():
    rng = np.random.default_rng(1)
    bank, shop = rng.normal(size=(300, 2)), rng.normal(size=(300, 2))
    labels = (rng.random(300) < 1 / (1 + np.exp(-0.5 * shop[:, 1]))).astype(float)  # weak signal: it soon overfits
    codes = {n: fit_bins(t, max_bins=8).transform(t) for n, t in (("bank", bank), ("shop", shop))}
    train, held = np.arange(300) >= 80, np.arange(300) < 80  # few training rows: it overfits within a few trees
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        keys = generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)
    label = StoppingLabel(LabelBoost(codes["bank"][train], width=9, labels=labels[train], partners=["shop"],
                                     params=PARAMS, keys=keys),
                          own_codes=codes["bank"][held], labels=labels[held], rounds=2)
    partner = StoppingPartner(PartnerBoost(codes["shop"][train], width=9, min_key_bits=1024,
                                           insecure_small_key_for_tests=True), codes=codes["shop"][held])
    results = run_machines(connect(["bank", "shop"], session=b"e" * 16), {"bank": label, "shop": partner})
    model, records = results["bank"], results["shop"]

    pooled = fit_pooled([codes["bank"][train], codes["shop"][train]], labels[train], widths=(9, 9), params=PARAMS)
    losses = [log_loss(labels[held], _margins(pooled, k, codes, held)) for k in range(1, PARAMS.trees + 1)]
    stopped, kept = first_stop(losses, rounds=2)
    assert kept < stopped < PARAMS.trees, "the data should make it stop early, or the test proves little"
    assert len(label.trees) == stopped and len(model.trees) == kept
    np.testing.assert_allclose(label.losses, losses[:stopped], rtol=0, atol=1e-9)
    for ours, theirs in zip(model.trees, pooled.trees[:kept], strict=True):
        assert {n: s.key() for n, s in ours.splits.items()} == {n: s.key() for n, s in theirs.splits.items()}
        assert max(abs(ours.leaves[n] - theirs.leaves[n]) for n in ours.leaves) <= 1e-6
    used = sum(s.party == 1 for t in model.trees for s in t.splits.values())
    assert len(records.columns) == used

    predict = {"bank": LabelPredict(model, own_codes=codes["bank"][held], partners=["shop"]),
               "shop": PartnerPredict(records, codes=codes["shop"][held], label="bank")}
    proba = run_machines(connect(["bank", "shop"], session=b"q" * 16), predict)["bank"]
    np.testing.assert_allclose(proba, 1 / (1 + np.exp(-_margins(pooled, kept, codes, held))), rtol=0, atol=1e-9)


def _margins(pooled, trees, codes, rows):
    """The pooled model's first ``trees`` trees on ``rows``."""
    from vsplit.boosting import BoostModel

    model = BoostModel(trees=pooled.trees[:trees], base=pooled.base, widths=pooled.widths)
    splits = [s for t in model.trees for s in t.splits.values() if s.party == 1]
    bits = np.zeros((int(rows.sum()), 1 + max((s.record for s in splits), default=-1)), np.uint8)
    for s in splits:
        bits[:, s.record] = goes_left(codes["shop"][rows][:, s.column], bin=s.bin, missing_left=s.missing_left, width=9)
    return model.margins(own_codes=codes["bank"][rows], decisions={1: bits})


def test_each_question_asks_for_the_new_trees_records_only_and_the_margins_equal_a_full_rescoring():
    """After every tree the partner sends the held-out bits of the records that tree added, no more; the margins
    the bank adds up from them equal the margins of every tree scored afresh with all the partner's decisions."""
    from vsplit.boosting import BoostModel
    from vsplit.boosting.messages import Ask, Decisions

    rng = np.random.default_rng(2)
    bank, shop = rng.normal(size=(260, 2)), rng.normal(size=(260, 3))
    labels = (rng.random(260) < 1 / (1 + np.exp(-shop[:, 0] - 0.5 * bank[:, 1]))).astype(float)
    codes = {n: fit_bins(t, max_bins=8).transform(t) for n, t in (("bank", bank), ("shop", shop))}
    train, held = np.arange(260) >= 60, np.arange(260) < 60
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        keys = generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)
    params = BoostParams(trees=6, max_depth=3, learning_rate=0.3, min_child_weight=0.5)
    label = StoppingLabel(LabelBoost(codes["bank"][train], width=9, labels=labels[train], partners=["shop"],
                                     params=params, keys=keys),
                          own_codes=codes["bank"][held], labels=labels[held], rounds=100)
    partner = StoppingPartner(PartnerBoost(codes["shop"][train], width=9, min_key_bits=1024,
                                           insecure_small_key_for_tests=True), codes=codes["shop"][held])
    asked: list[int] = []
    sent: list[int] = []

    def tap(sender, recipient, message, frame):
        if isinstance(message, Ask):
            asked.append(message.first)
        elif isinstance(message, Decisions):
            sent.append(message.bits.shape[1])

    run_machines(connect(["bank", "shop"], session=b"n" * 16, taps=[tap]), {"bank": label, "shop": partner})
    records = partner.machine.records
    per_tree = [sum(s.party == 1 for s in t.splits.values()) for t in label.trees]
    assert len(asked) == len(sent) == params.trees and sum(per_tree) == len(records) > params.trees
    assert sent == per_tree and asked == np.cumsum([0, *per_tree[:-1]]).tolist()

    everything = PartnerModel(columns=records[:, 0], bins=records[:, 1], missing_left=records[:, 2].astype(np.uint8),
                              width=9).decisions(codes["shop"][held])
    m = label.machine
    full = [BoostModel(trees=tuple(m.trees[:k]), base=m.base, widths=(9, 9)).margins(
        own_codes=codes["bank"][held], decisions={1: everything}) for k in range(1, params.trees + 1)]
    np.testing.assert_allclose(label._margin, full[-1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(label.losses, [log_loss(labels[held], f) for f in full], rtol=0, atol=1e-12)
