"""`vsplit explain` of a boosting run: per-party contributions and reason codes at the bank, from the one prediction
round (a partner answers its decision bits, nothing more).

The module fixture trains a small run (bank, shop, telco; 5 trees of depth 3, 1024-bit test keys) in one process,
then runs `vsplit explain` as three OS processes over mutual TLS on every party's test table. The bank's
explanations equal the pooled reference's contributions computed in this process (same trees, same kept gradient
sums, per row and party within 1e-9) and the notebook estimator's, add up to the margin less the trees' expected
value, and the partner's frames, tapped in a run in one process, hold its decision bits only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from _boosting_support import NAMES, small_keys, train_boosting
from _pilot_support import start, wait_all
from _serving_support import Tap, _channels, _in_threads
from _three_party_support import COLUMNS, PARTNERS

from vsplit.boosting import fit_bins, fit_pooled
from vsplit.boosting.explain import kept_values, node_values
from vsplit.boosting.gains import goes_left
from vsplit.config import load_config
from vsplit.config.boosting import SMALL_KEYS_ENV, boost_params
from vsplit.explain.path import explain_trees
from vsplit.node.boost_state import Encoder, trees_from
from vsplit.runtime.checkpoint import load_checkpoint
from vsplit.transport.codec import decode

RUN = "why-trees"
BANK_OWN = [c for c in COLUMNS["bank"] if c != "y"]


@pytest.fixture(autouse=True)
def _small_keys(monkeypatch):
    monkeypatch.setenv(SMALL_KEYS_ENV, "1")  # the configs name 1024-bit keys: tests only


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("boost-explain")
    with small_keys():
        train_boosting(root, RUN)
        configs = {p: root / p / "party.toml" for p in NAMES}
        for path in configs.values():  # the bank's reasons: a low probability of subscribing "declines"
            path.write_text(path.read_text() + '\n[explain]\nreasons = 2\ndecline_when = "low"\n'
                            'texts = { age = "age of the applicant" }\n')
        logs = {p: root / f"{p}-explain.log" for p in NAMES}
        procs = {p: start(["explain", "--config", str(c), "--input", str(root / p / "data" / "test.parquet"),
                           "--job", "j1", "--set", f"output.run_id={RUN}"], log=logs[p]) for p, c in configs.items()}
        wait_all(procs, logs, timeout=120)
    return root


def _aligned(tables: dict[str, pd.DataFrame]) -> dict[str, np.ndarray]:
    """Each party's rows of the customers all three know, in sorted-ID order (the order PSI agrees on)."""
    shared = set.intersection(*(set(t["customer_id"].astype(str)) for t in tables.values()))
    out = {}
    for name, table in tables.items():
        ids = table["customer_id"].astype(str).to_numpy()
        rows = np.nonzero(np.isin(ids, list(shared)))[0]
        out[name] = rows[np.argsort(ids[rows], kind="stable")]
    return out


def _codes(root: Path, split: str, coders: dict) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Every party's codes of the customers all know in ``split``, with (``coders``) or fitting the encoders and
    bins as each node does; the bank's labels and the IDs."""
    tables = {n: pd.read_parquet(root / n / "data" / f"{split}.parquet") for n in NAMES}
    rows = _aligned(tables)
    codes = {}
    for name, table in tables.items():
        features = table.drop(columns=["customer_id", *(["y"] if name == "bank" else [])])
        if name not in coders:
            encoder = Encoder.fit(features)
            values = encoder.transform(features.iloc[rows[name]])
            coders[name] = (encoder, fit_bins(values, categorical=encoder.categorical, max_bins=8))
        encoder, bins = coders[name]
        codes[name] = bins.transform(encoder.transform(features.iloc[rows[name]]))
    labels = (tables["bank"]["y"].iloc[rows["bank"]].astype(str) == "yes").to_numpy(dtype=float)
    return codes, labels, tables["bank"]["customer_id"].astype(str).to_numpy()[rows["bank"]]


def _bits(model, codes: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Each partner's decision bits, computed here from the pooled codes (what its answer holds)."""
    splits = [s for tree in model.trees for s in tree.splits.values() if s.party]
    bits = {k: np.zeros((len(codes["bank"]), sum(s.party == k for s in splits)), np.uint8) for k in (1, 2)}
    for s in splits:
        bits[s.party][:, s.record] = goes_left(codes[NAMES[s.party]][:, s.column], bin=s.bin,
                                               missing_left=s.missing_left, width=model.widths[s.party])
    return bits


@pytest.fixture(scope="module")
def pooled(run) -> dict:
    """The pooled reference on the aligned training rows, and its explanation of the test rows, in this process."""
    with small_keys():
        params = boost_params(load_config(run / "bank" / "party.toml"))
    coders: dict = {}
    codes, labels, _ = _codes(run, "train", coders)
    model = fit_pooled([codes[n] for n in NAMES], labels, widths=[coders[n][1].width for n in NAMES], params=params)
    replayed = node_values(model, own_codes=codes["bank"], decisions=_bits(model, codes), labels=labels,
                           params=params)
    test, _, ids = _codes(run, "test", coders)
    explanation = explain_trees(model, kept_values(model, params), own_codes=test["bank"], decisions=_bits(model, test),
                                ids=list(ids), own_columns=BANK_OWN, partners=list(PARTNERS), label_party="bank")
    return {"model": model, "params": params, "replayed": replayed, "explanation": explanation}


def test_the_trees_keep_the_pooled_gradient_sums_and_replaying_training_gives_the_same_node_values(run, pooled):
    state = load_checkpoint(run / "runs" / RUN / "bank" / "model.npz", run_id=RUN, party="bank")
    ours = trees_from(state)
    assert len(ours) == len(pooled["model"].trees) == 5
    for a, b in zip(ours, pooled["model"].trees, strict=True):
        assert a.sums == b.sums and a.sums.keys() == a.leaves.keys()  # the same integers, every leaf
        assert all(isinstance(g, int) and h > 0 for g, h in a.sums.values())
    for kept, replayed in zip(kept_values(pooled["model"], pooled["params"]), pooled["replayed"], strict=True):
        assert kept.keys() == replayed.keys()
        assert max(abs(kept[n] - replayed[n]) for n in kept) <= 1e-12


def test_three_processes_explain_as_the_pooled_model_and_add_up_to_the_margin(run, pooled):
    folder = run / "runs" / RUN / "bank" / "explanations" / "j1"
    got = pd.read_csv(folder / "explanations.csv", dtype={"customer_id": str}).set_index("customer_id")
    want = pooled["explanation"]
    assert len(want.ids) > 100 and sorted(got.index) == sorted(want.ids)  # every customer all three know
    got = got.loc[want.ids]
    np.testing.assert_allclose(got[BANK_OWN].to_numpy(), want.features.to_numpy(), rtol=0, atol=1e-9)
    for partner in PARTNERS:
        np.testing.assert_allclose(got[f"party:{partner}"], want.groups[partner], rtol=0, atol=1e-9)
        assert np.abs(got[f"party:{partner}"]).max() > 0  # the partner owns splits that move rows
    np.testing.assert_allclose(got["score"], want.score, rtol=0, atol=1e-9)
    model = pooled["model"]  # the expected value: the base margin plus each tree's root value
    expected = model.base + sum(v[0] for v in kept_values(model, pooled["params"]))
    np.testing.assert_allclose(got["baseline_score"], expected, rtol=0, atol=1e-12)
    total = got[[*BANK_OWN, *(f"party:{p}" for p in PARTNERS)]].sum(axis=1)
    assert np.abs(total - (got["score"] - got["baseline_score"])).max() < 1e-9
    np.testing.assert_allclose(got["probability"], 1 / (1 + np.exp(-got["score"])), rtol=1e-12)
    summary = json.loads((folder / "explain.json").read_text())
    assert summary["rows"] == len(got) and summary["method"] == "path" and summary["completeness_max_error"] < 1e-9
    assert set(summary["global_importance"]) == {*BANK_OWN, "shop", "telco"}


def test_reason_codes_name_the_banks_columns_and_each_partner_anonymously(run):
    folder = run / "runs" / RUN / "bank" / "explanations" / "j1"
    reasons = json.loads((folder / "reasons.json").read_text())
    assert reasons and all(r["probability"] < 0.5 and len(r["reasons"]) <= 2 for r in reasons)
    codes = {c["code"] for r in reasons for c in r["reasons"]}
    assert codes <= {*BANK_OWN, "party:shop", "party:telco"} and codes & {"party:shop", "party:telco"}
    texts = {c["text"] for r in reasons for c in r["reasons"]}
    assert texts <= {"age of the applicant", *BANK_OWN[1:], "information held by partner shop",
                     "information held by partner telco"}
    assert all(c["contribution"] < 0 for r in reasons for c in r["reasons"])  # each pushes toward "declined"
    table = pd.read_csv(folder / "reasons.csv")
    assert len(table) == len(reasons)
    for partner in PARTNERS:  # a partner writes no attributions: it does not know the trees' values
        mine = json.loads((run / "runs" / RUN / partner / "explanations" / "j1" / "explain.json").read_text())
        assert mine["rows"] > 100 and "explanations.csv" not in mine.get("files", [])
        assert not (run / "runs" / RUN / partner / "explanations" / "j1" / "attributions.csv").exists()



def test_tapped_partner_frames_are_psi_and_its_decision_bits_only(run, pooled):
    from vsplit.boosting.messages import Decisions
    from vsplit.explain.process import explain_party

    channels = _channels()
    taps = {p: Tap(channels[p]["bank"]) for p in PARTNERS}
    for p in PARTNERS:
        channels[p]["bank"] = taps[p]
    configs = {p: load_config(run / p / "party.toml", overrides=[f"output.run_id={RUN}"]) for p in NAMES}
    _in_threads({p: (lambda p=p: explain_party(configs[p], run / p / "data" / "test.parquet", job="tap",
                                               channels=channels[p])) for p in NAMES})
    records = {k: sum(s.party == k for t in pooled["model"].trees for s in t.splits.values()) for k in (1, 2)}
    rows = len(pooled["explanation"].ids)
    for k, p in enumerate(PARTNERS, start=1):
        messages = [decode(f)[1] for f in taps[p].frames]
        rest = [m for m in messages if type(m).__module__ != "vsplit.psi.messages"]
        assert len(rest) == 1 and type(rest[0]) is Decisions  # one answer, after PSI
        bits = rest[0].bits
        assert bits.dtype == np.uint8 and bits.shape == (rows, records[k]) and records[k] > 0
        assert set(np.unique(bits).tolist()) <= {0, 1}
    same = pd.read_csv(run / "runs" / RUN / "bank" / "explanations" / "tap" / "explanations.csv")
    first = pd.read_csv(run / "runs" / RUN / "bank" / "explanations" / "j1" / "explanations.csv")
    pd.testing.assert_frame_equal(same, first)  # in one process as between three


def test_the_notebook_estimator_explains_as_the_node(run):
    """`SplitBoostClassifier.explain` on the same views (same rows, bins and settings) equals `vsplit explain`."""
    import warnings

    from vsplit import SplitBoostClassifier

    views = {n: pd.read_parquet(run / n / "data" / "train.parquet") for n in NAMES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the small key's warning
        clf = SplitBoostClassifier(n_estimators=5, max_depth=3, max_bins=8, key_bits=1024, positive_label="yes",
                                   insecure_small_key_for_tests=True).fit(views)
    test = {n: pd.read_parquet(run / n / "data" / "test.parquet") for n in NAMES}
    ours = clf.explain(test).table(id_column="customer_id", probabilities=True).set_index("customer_id")
    node = pd.read_csv(run / "runs" / RUN / "bank" / "explanations" / "j1" / "explanations.csv",
                       dtype={"customer_id": str}).set_index("customer_id")
    assert sorted(ours.index) == sorted(node.index) and list(ours.columns) == list(node.columns)
    np.testing.assert_allclose(ours.loc[node.index].to_numpy(), node.to_numpy(), rtol=0, atol=1e-12)
