"""The small-table blend between organizations: ``[model] kind = "ensemble"`` with ``[ensemble] second = "scorecard"``
and ``weight = 0.5``. A bank and two partners as three OS processes over mutual TLS train a split network and the
vertical scorecard over the same channels, and ``vsplit predict``'s probabilities equal
``SplitClassifier(candidates="network+scorecard")`` in one process with the same rows, seeds and settings (the
estimator's small-table default, :mod:`vsplit.candidates`). 1024-bit test keys behind the test-only variable.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from _ensemble_support import NAMES, SETS, predicted, served, train_then_predict, views

from vsplit.config import load_config
from vsplit.config.boosting import SMALL_KEYS_ENV
from vsplit.errors import ConfigError
from vsplit.runtime.checkpoint import load_checkpoint

RUN = "blend-tls"
EPOCHS = 2
EXTRA = f"""
[model]
kind = "ensemble"

[train]
epochs = {EPOCHS}

[woe]
key_bits = 1024

[scorecard]
key_bits = 1024

[ensemble]
second = "scorecard"
weight = 0.5
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One blend run as three processes over mutual TLS, then ``vsplit predict``'s code on every party's test table
    in threads over memory channels."""
    root = tmp_path_factory.mktemp("blend")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SMALL_KEYS_ENV, "1")
        train_then_predict(root, RUN, extra=EXTRA)
    return root


@pytest.fixture(autouse=True)
def _small_keys(monkeypatch):
    monkeypatch.setenv(SMALL_KEYS_ENV, "1")  # the configs name 1024-bit keys: tests only


@pytest.fixture(scope="module")
def reference(trained, one_thread):
    """The estimator's blend on the same tables and seeds, one torch thread as the party processes."""
    from vsplit import SplitClassifier
    from vsplit.models.recipe import PLAIN

    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        patch.setenv(SMALL_KEYS_ENV, "1")
        warnings.simplefilter("ignore", UserWarning)  # customers a partner does not know; the tests' key size
        clf = SplitClassifier(label_party="bank", label="y", positive_label="yes", random_state=0,
                              candidates="network+scorecard", **{**PLAIN, "epochs": EPOCHS})
        return clf.fit(views(trained, "train"))


def test_three_processes_train_the_network_and_the_scorecard_each_in_its_own_folder(trained):
    folder = trained / "runs" / RUN
    result = json.loads((folder / "bank" / "result.json").read_text())
    assert result["second"] == "scorecard" and result["weight"] == 0.5 and not result["refit"]
    assert 0.5 < result["test"]["auc"] <= 1 and {"networks_auc", "scorecard_auc"} <= set(result["test"])
    for party in NAMES:
        state = load_checkpoint(folder / party / "model.npz", run_id=RUN, party=party)
        assert state["kind"] == "ensemble" and list(state["parts"]) == ["networks", "scorecard"]
        card = load_checkpoint(folder / party / "scorecard" / "model.npz", run_id=RUN, party=party)
        assert card["kind"] == "scorecard" and len(card["maps"]) >= 1
        assert (folder / party / "networks" / "model.npz").is_file() and not (folder / party / "trees").exists()


def test_vsplit_predict_equals_the_estimators_small_table_blend(trained, reference):
    _, scored, test, ids = predicted(trained, RUN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = pd.Series(reference.predict_proba(test)[:, 1], index=ids)
        card = pd.Series(reference.scorecard_.predict_proba(test)[:, 1], index=ids)
    assert reference.candidates_ == "network+scorecard"
    assert len(scored) == int(expected.notna().sum()) > 100
    np.testing.assert_allclose(scored.to_numpy(), expected[scored.index].to_numpy(), rtol=0, atol=1e-5)
    assert np.abs(scored.to_numpy() - card[scored.index].to_numpy()).max() > 1e-3  # neither part alone


def test_an_unknown_second_part_is_refused_naming_the_key(trained):
    with pytest.raises(ConfigError, match=r"ensemble.second: 'forest'"):
        load_config(trained / "bank" / "party.toml", overrides=['ensemble.second="forest"'])


def test_served_scores_equal_vsplit_predict_with_one_partner_round_trip_for_both_parts(trained):
    """Live mode: each partner answers every batch once, its embeddings and its points side by side."""
    from vsplit.serve import messages as m
    from vsplit.transport.codec import decode

    with served(trained, RUN) as out:
        assert sorted(out.served.index) == sorted(out.expected.index) and len(out.served) > 100
        np.testing.assert_allclose(out.served.to_numpy(), out.expected[out.served.index].to_numpy(), rtol=0,
                                   atol=1e-6)
        for p, (_, partner_tap) in out.taps.items():
            replies = [a for a in (decode(f)[1] for f in partner_tap.frames) if isinstance(a, m.EmbedReply)]
            assert len(replies) == out.batches
            assert all(r.values.shape[1] == out.version.networks.partners[p][1] + 1 for r in replies)


@pytest.fixture(scope="module")
def explained(trained) -> dict:
    """``vsplit explain``'s code at every party on its test table, in threads over memory channels: each party's
    explain.json."""
    from _serving_support import _channels, _in_threads

    from vsplit.explain.process import explain_party

    channels = _channels()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SMALL_KEYS_ENV, "1")
        configs = {p: load_config(trained / p / "party.toml", overrides=SETS[1::2]) for p in NAMES}
        return _in_threads({p: (lambda p=p: explain_party(configs[p], trained / p / "data" / "test.parquet",
                                                          job="e1", channels=channels[p])) for p in NAMES})


def test_vsplit_explain_gives_the_blends_contributions_as_the_estimator_explains_them(trained, reference, explained):
    """``vsplit explain`` at every party: the bank's contributions (half the network's, half the scorecard's points
    as log-odds) add up to the blend's log-odds and equal the estimator's."""
    from vsplit.ensemble import log_odds

    paths = explained
    got = pd.read_csv(paths["bank"].parent / "explanations.csv", dtype={"customer_id": str}).set_index("customer_id")
    parts = [c for c in got.columns if c not in ("score", "baseline_score", "probability", "baseline_probability")]
    assert {"party:shop", "party:telco"} <= set(parts) and "age" in parts
    np.testing.assert_allclose(got[parts].sum(axis=1), got["score"] - got["baseline_score"], atol=1e-4)
    batch = pd.read_csv(trained / "runs" / RUN / "bank" / "predictions" / "j1" / "predictions.csv",
                        dtype={"customer_id": str}).set_index("customer_id")
    np.testing.assert_allclose(got["score"], log_odds(batch.loc[got.index, "probability"].to_numpy()), atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = reference.explain(views(trained, "test")).table(id_column="customer_id").set_index("customer_id")
    np.testing.assert_allclose(got[parts].to_numpy(), expected.loc[got.index, parts].to_numpy(), atol=1e-4)


def test_served_reason_codes_equal_vsplit_explains(trained, explained):
    """``"reasons"`` asked of the live service: each applicant the blend scored gets ``vsplit explain``'s reason
    codes of it (the network explained with the partners over the serving links, the scorecard from the points that
    scored it), within the float32 of the partners' answers."""
    from _serving_support import explain_reasons

    from vsplit.serve.reasons import reasons_for

    k = 2
    table = pd.read_csv(explained["bank"].parent / "explanations.csv", dtype={"customer_id": str})
    expected = explain_reasons(trained / "bank" / "party.toml", table, k)
    with served(trained, RUN) as out:
        picked = [i for i, s in enumerate(out.scored) if s.model == "split"][:60]
        config = out.scorer.config
        extra = reasons_for(config, out.scorer.versions, out.scorer.links, [out.rows[i] for i in picked],
                            [out.scored[i] for i in picked], k)
    assert len(picked) == 60
    for i, answer in zip(picked, extra, strict=True):
        want = expected[out.scored[i].id]
        assert [(r["code"], r["text"]) for r in answer["reasons"]] == [(r["code"], r["text"]) for r in want["reasons"]]
        np.testing.assert_allclose([r["contribution"] for r in answer["reasons"]],
                                   [r["contribution"] for r in want["reasons"]], rtol=0, atol=1e-4)
        assert answer["declined"] == want["declined"]
    assert {c["code"] for a in extra for c in a["reasons"]} & {"party:shop", "party:telco"}
