"""Vertical boosting is lossless: a bank (labels and columns) and two partners, their machines run in one process
over memory channels by the project's in-process runner, grow the same trees as the pooled reference on the same
bins (same splits by party, column, bin and missing direction; leaves within 1e-6), and one-round prediction equals
the pooled model's walk.

A 1024-bit OU key behind the test-only flag, made once; 400 rows, 4 trees of depth 3.
"""

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
    PartnerPredict,
    fit_bins,
    fit_pooled,
)
from vsplit.boosting.gains import goes_left
from vsplit.he import generate_keypair
from vsplit.runtime.inprocess import connect, run_machines

pytestmark = pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning")
PARAMS = BoostParams(trees=4, max_depth=3, learning_rate=0.3, reg_lambda=1.0, min_child_weight=0.5)
PARTNERS = ("shop", "telco")


def _tables(rows: int = 400, seed: int = 3):
    """A bank's two columns and labels, a shop's two (one categorical) and a telco's two, with missing values."""
    rng = np.random.default_rng(seed)
    bank = rng.normal(size=(rows, 2))
    shop = np.column_stack([rng.normal(size=rows), rng.integers(0, 6, rows).astype(float)])
    telco = rng.normal(size=(rows, 2))
    for table in (bank, shop, telco):
        table[rng.random(table.shape) < 0.08] = np.nan
    logit = (0.8 * np.nan_to_num(bank[:, 0]) + 1.2 * np.nan_to_num(shop[:, 0]) + 0.6 * (shop[:, 1] == 2)
             - 1.0 * np.nan_to_num(telco[:, 1], nan=1.5))
    labels = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(float)
    return labels, {"bank": bank, "shop": shop, "telco": telco}


@pytest.fixture(scope="module")
def run():
    labels, tables = _tables()
    bins = {name: fit_bins(t, categorical=(1,) if name == "shop" else (), max_bins=8) for name, t in tables.items()}
    codes = {name: bins[name].transform(t) for name, t in tables.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        keys = generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)
    sent = []

    def tap(sender, recipient, message, frame):
        sent.append((sender, recipient, message, bytes(frame)))

    machines = {"bank": LabelBoost(codes["bank"], width=bins["bank"].width, labels=labels, partners=PARTNERS,
                                   params=PARAMS, keys=keys)}
    for name in PARTNERS:
        machines[name] = PartnerBoost(codes[name], width=bins[name].width, label="bank", min_key_bits=1024,
                                      insecure_small_key_for_tests=True)
    results = run_machines(connect(["bank", *PARTNERS], session=b"b" * 16, taps=[tap]), machines)
    pooled = fit_pooled([codes[n] for n in ("bank", *PARTNERS)], labels,
                        widths=[bins[n].width for n in ("bank", *PARTNERS)], params=PARAMS)
    return {"labels": labels, "tables": tables, "bins": bins, "codes": codes, "results": results, "pooled": pooled,
            "sent": sent, "keys": keys}


def test_split_trees_equal_the_pooled_trees_in_memory(run):
    split, pooled = run["results"]["bank"], run["pooled"]
    assert len(split.trees) == len(pooled.trees) == PARAMS.trees
    owners = set()
    for ours, theirs in zip(split.trees, pooled.trees, strict=True):
        assert {n: s.key() for n, s in ours.splits.items()} == {n: s.key() for n, s in theirs.splits.items()}
        assert {n: s.record for n, s in ours.splits.items()} == {n: s.record for n, s in theirs.splits.items()}
        assert ours.leaves.keys() == theirs.leaves.keys()
        assert max(abs(ours.leaves[n] - theirs.leaves[n]) for n in ours.leaves) <= 1e-6
        owners |= {s.party for s in ours.splits.values()}
    assert owners == {0, 1, 2}, "the data should make every party win a split, or the test proves little"
    assert any(s.missing_left for t in split.trees for s in t.splits.values()), "a default direction to the left"


def test_one_round_prediction_equals_the_pooled_walk(run):
    names = ("bank", *PARTNERS)
    fresh_labels, fresh = _tables(rows=120, seed=11)
    codes = {n: run["bins"][n].transform(fresh[n]) for n in names}
    sent = []
    machines = {"bank": LabelPredict(run["results"]["bank"], own_codes=codes["bank"], partners=PARTNERS)}
    for name in PARTNERS:
        machines[name] = PartnerPredict(run["results"][name], codes=codes[name], label="bank")
    taps = [lambda sender, recipient, message, frame: sent.append((sender, recipient))]
    proba = run_machines(connect(list(names), session=b"p" * 16, taps=taps), machines)["bank"]
    pooled = run["pooled"]
    walked = pooled.predict_proba(own_codes=codes["bank"], decisions=_pooled_decisions(pooled, codes))
    np.testing.assert_allclose(proba, walked, rtol=0, atol=1e-9)
    assert sorted(sent) == sorted([("bank", p) for p in PARTNERS] + [(p, "bank") for p in PARTNERS])  # one round
    assert 0.05 < float(np.mean(proba)) < 0.95 and len(fresh_labels) == len(proba)




def _arrays(message):
    return {name: value for name, value in vars(message).items() if isinstance(value, np.ndarray)}


def test_partners_see_only_ciphertexts_and_the_bank_no_partner_value(run):
    """Tap every frame: nothing the bank sends holds a float, a label or a gradient; nothing a partner sends holds a
    float, one of its bin edges or one of its values."""
    labels, tables, bins = run["labels"], run["tables"], run["bins"]
    from vsplit.boosting.gains import base_margin, gradients, quantize

    g, h = gradients(np.full(len(labels), base_margin(labels)), labels)  # the first tree's gradients
    secrets = [labels.tobytes(), labels.astype(np.uint8).tobytes(), g[:4].tobytes(), h[:4].tobytes(),
               quantize(g, h, scale=PARAMS.scale)[:4].tobytes(), g[:4].astype(np.float32).tobytes()]
    sent = run["sent"]
    from_bank = [(m, f) for s, _, m, f in sent if s == "bank"]
    kinds = {type(m).__name__ for m, _ in from_bank}
    assert kinds == {"BoostHello", "Gradients", "Level", "Record", "Finish"}
    for message, frame in from_bank:
        assert all(a.dtype.kind in "iu" for a in _arrays(message).values()), type(message).__name__
        assert not any(secret in frame for secret in secrets), type(message).__name__
    for name in PARTNERS:
        theirs = [(m, f) for s, _, m, f in sent if s == name]
        assert {type(m).__name__ for m, _ in theirs} == {"BoostReady", "Histograms", "Assigned"}
        edges = [cut[i : i + 2].tobytes() for cut in bins[name].cuts for i in range(0, len(cut) - 1)]
        values = [tables[name][i : i + 2, 0].tobytes() for i in range(0, 40, 2)]
        for message, frame in theirs:
            assert all(a.dtype.kind in "iu" for a in _arrays(message).values()), type(message).__name__
            assert not any(secret in frame for secret in edges + values), type(message).__name__


def _pooled_decisions(pooled, codes):
    """The partners' bits as the pooled model computes them from everyone's codes, by record id."""
    names = ("bank", *PARTNERS)
    splits = [s for tree in pooled.trees for s in tree.splits.values() if s.party]
    bits = {k: np.zeros((len(codes["bank"]), sum(s.party == k for s in splits)), np.uint8) for k in (1, 2)}
    for s in splits:
        bits[s.party][:, s.record] = goes_left(codes[names[s.party]][:, s.column], bin=s.bin,
                                               missing_left=s.missing_left, width=pooled.widths[s.party])
    return bits


def _same_trees(split, pooled):
    for ours, theirs in zip(split.trees, pooled.trees, strict=True):
        assert {n: s.key() for n, s in ours.splits.items()} == {n: s.key() for n, s in theirs.splits.items()}
        assert ours.leaves.keys() == theirs.leaves.keys()
        assert max(abs(ours.leaves[n] - theirs.leaves[n]) for n in ours.leaves) <= 1e-6


def test_partners_send_only_the_sums_the_bank_cannot_derive(run):
    """Of each level a partner sums only the smaller sibling of each pair (the bank subtracts it from the parent it
    decrypted a level up) and, of those, only non-empty cells, leaving one cell a column to the node's total."""
    from vsplit.boosting.messages import Histograms, Level

    levels = [m for s, r, m, _ in run["sent"] if s == "bank" and r == "shop" and isinstance(m, Level)]
    answers = [m for s, _, m, _ in run["sent"] if s == "shop" and isinstance(m, Histograms)]
    assert len(levels) == len(answers) > PARAMS.trees
    cols, width = run["codes"]["shop"].shape[1], run["bins"]["shop"].width
    dense = sent = 0
    for level, answer in zip(levels, answers, strict=True):
        nodes = np.unique(level.nodes[level.nodes >= 0])
        assert len(answer.cells) == (1 if level.depth == 0 else len(nodes) - len(nodes) // 2) * cols * width
        assert ((answer.cells == 2).reshape(-1, cols, width).sum(axis=2) <= 1).all()
        dense += len(nodes) * cols * width
        sent += int((answer.cells == 1).sum())
    assert 2 * sent < dense, (sent, dense)  # today: about a third


def test_goss_split_trees_equal_the_pooled_goss_trees(run):
    """GOSS (top 20 % of |g| kept, 30 % of the rows drawn among the rest, weighted): the split run encrypts and
    sends only the sampled rows' gradients, and still grows exactly the pooled GOSS trees."""
    from vsplit.boosting.messages import Gradients

    params = BoostParams(trees=3, max_depth=3, min_child_weight=0.5, goss_top_rate=0.2, goss_other_rate=0.3, seed=5)
    names = ("bank", *PARTNERS)
    keys, codes, bins, labels = run["keys"], run["codes"], run["bins"], run["labels"]
    sent = []
    machines = {"bank": LabelBoost(codes["bank"], width=bins["bank"].width, labels=labels, partners=PARTNERS,
                                   params=params, keys=keys)}
    for name in PARTNERS:
        machines[name] = PartnerBoost(codes[name], width=bins[name].width, min_key_bits=1024,
                                      insecure_small_key_for_tests=True)
    taps = [lambda sender, recipient, message, frame: sent.append(message)]
    split = run_machines(connect(list(names), session=b"g" * 16, taps=taps), machines)["bank"]
    pooled = fit_pooled([codes[n] for n in names], labels, widths=[bins[n].width for n in names], params=params)
    _same_trees(split, pooled)
    plain = fit_pooled([codes[n] for n in names], labels, widths=[bins[n].width for n in names],
                       params=BoostParams(trees=3, max_depth=3, min_child_weight=0.5))
    assert [t.leaves for t in plain.trees] != [t.leaves for t in pooled.trees], "GOSS changed nothing"
    for message in (m for m in sent if isinstance(m, Gradients)):
        assert int(message.sample.sum()) == int(0.2 * len(labels)) + int(0.3 * len(labels))
        header = 19
        assert len(message.frame) == header + int(message.sample.sum()) * keys.public.width


def test_process_backend_grows_the_same_trees(run):
    """The bank's encryption and the partners' sums spread over two worker processes: the same trees, the same
    frames' sizes (the work is split on packed-ciphertext boundaries, so the layout is the serial one)."""
    from vsplit.boosting.backend import ProcessBackend

    params = BoostParams(trees=2, max_depth=3, min_child_weight=0.5)
    names = ("bank", *PARTNERS)
    keys, codes, bins, labels = run["keys"], run["codes"], run["bins"], run["labels"]
    with ProcessBackend(workers=2, min_split=1) as backend:
        machines = {"bank": LabelBoost(codes["bank"], width=bins["bank"].width, labels=labels, partners=PARTNERS,
                                       params=params, keys=keys, backend=backend)}
        for name in PARTNERS:
            machines[name] = PartnerBoost(codes[name], width=bins[name].width, min_key_bits=1024,
                                          insecure_small_key_for_tests=True, backend=backend)
        split = run_machines(connect(list(names), session=b"w" * 16), machines)["bank"]
        assert backend.spread > 2 * params.trees, "the work should have gone to the workers"
    _same_trees(split, fit_pooled([codes[n] for n in names], labels, widths=[bins[n].width for n in names],
                                  params=params))


def test_serial_backend_in_short_calls_grows_the_same_trees(run, monkeypatch):
    """A long encryption or sum is split into short sf-heu calls (the heartbeat thread runs between them): with
    calls of a few rows, the same trees as the pooled reference, and frames of the one-call layout."""
    import vsplit.boosting.backend as backend

    monkeypatch.setattr(backend, "ENCRYPT_CHUNK", 7)
    monkeypatch.setattr(backend, "SUM_CHUNK", 5)
    calls = {"encrypt": 0, "sums": 0}
    encrypt_rows, sums = backend.encrypt_rows, backend.SerialBackend._sums

    def counting_encrypt(*args, **kwargs):
        calls["encrypt"] += 1
        return encrypt_rows(*args, **kwargs)

    def counting_sums(*args, **kwargs):
        calls["sums"] += 1
        return sums(*args, **kwargs)

    monkeypatch.setattr(backend, "encrypt_rows", counting_encrypt)
    monkeypatch.setattr(backend.SerialBackend, "_sums", staticmethod(counting_sums))
    params = BoostParams(trees=2, max_depth=3, min_child_weight=0.5)
    names = ("bank", *PARTNERS)
    keys, codes, bins, labels = run["keys"], run["codes"], run["bins"], run["labels"]
    machines = {"bank": LabelBoost(codes["bank"], width=bins["bank"].width, labels=labels, partners=PARTNERS,
                                   params=params, keys=keys)}
    for name in PARTNERS:
        machines[name] = PartnerBoost(codes[name], width=bins[name].width, min_key_bits=1024,
                                      insecure_small_key_for_tests=True)
    split = run_machines(connect(list(names), session=b"c" * 16), machines)["bank"]
    assert calls["encrypt"] >= params.trees * len(labels) // 7 and calls["sums"] > 4 * params.trees * len(PARTNERS)
    _same_trees(split, fit_pooled([codes[n] for n in names], labels, widths=[bins[n].width for n in names],
                                  params=params))
