"""The split ensemble between organizations (``[model] kind = "ensemble"``): a bank and two partners as three OS
processes over mutual TLS train a bag of split networks and vertical boosted trees, the bank chooses the weight on
rows it set aside and both parts are refitted on every row; the weight, its validation scores and ``vsplit
predict``'s probabilities equal :class:`vsplit.ensemble.SplitEnsemble` in one process with the same rows, seeds and
settings (tests/_ensemble_support.py); bad settings and ``--resume`` fail clearly.

One trained run (module fixture) serves every test of the file.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from _ensemble_support import (
    EXTRA,
    NAMES,
    NETWORKS,
    SETS,
    TREES,
    in_memory,
    predicted,
    served,
    train_then_predict,
    views,
)
from _serving_support import ServeProcesses

from vsplit.config import load_config
from vsplit.config.boosting import SMALL_KEYS_ENV
from vsplit.errors import CheckpointError, ConfigError
from vsplit.runtime.checkpoint import load_checkpoint

RUN = "ens-tls"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One ensemble run as three processes over mutual TLS, then ``vsplit predict``'s code (``PartyNode.predict``)
    on every party's test table, in threads over memory channels: a second set of processes would only start the
    same code again."""
    root = tmp_path_factory.mktemp("ensemble")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SMALL_KEYS_ENV, "1")
        train_then_predict(root, RUN)
    return root


@pytest.fixture(autouse=True)
def _small_keys(monkeypatch):
    monkeypatch.setenv(SMALL_KEYS_ENV, "1")  # the configs name 1024-bit keys: tests only


@pytest.fixture(scope="module")
def reference(trained):
    """The same ensemble in one process."""
    return in_memory(trained)


def _result(root, party: str, run: str = RUN) -> dict:
    return json.loads((root / "runs" / run / party / "result.json").read_text())


def test_three_processes_over_tls_choose_the_weight_split_ensemble_chooses_in_one_process(trained, reference):
    result = _result(trained, "bank")
    assert result["weight"] == reference.weight_
    assert dict(map(tuple, result["weight_scores"])) == pytest.approx(reference.weight_scores_, abs=1e-6)
    assert result["validation_auc"] == pytest.approx(reference.validation_auc_, abs=1e-6)
    # refitted on every row: the trees kept, scaled by the rows' ratio, as the in-memory refit
    assert result["refit"] and result["trees"] == reference.refit_trees_params_["n_estimators"] > TREES
    assert 0.5 < result["test"]["auc"] <= 1 and result["test"]["n_scored"] > 100
    assert len(result["networks"]) == NETWORKS and result["networks"][0]["epochs_run"] == len(result["history"]) > 0
    assert f"the networks weigh {reference.weight_:g}" in (trained / "bank-train.log").read_text()
    folder = trained / "runs" / RUN
    for party in NAMES:  # each part its own model file; only the bank's top-level file holds the weight
        state = load_checkpoint(folder / party / "model.npz", run_id=RUN, party=party)
        assert state["kind"] == "ensemble" and state["networks"] == NETWORKS
        assert ("weight" in state) == (party == "bank")
        assert all((folder / party / part / "model.npz").is_file() for part in ("networks", "trees"))
        assert not (folder / party / "trees" / "checkpoints").exists()  # nothing resumes an ensemble: none kept
        if party != "bank":
            assert _result(trained, party)["weight"] is None and _result(trained, party)["test"] is None


def test_vsplit_report_merges_and_checks_an_ensemble_run(trained, reference):
    """The bank's report of the three-process run: the combination's test metrics (result.json's AUC) with their
    bootstrap interval, the weight and how it was chosen, each part's own test metrics, no bank-alone baseline;
    ``vsplit report --run --check`` validates it and merges the partners' reports."""
    import subprocess
    import sys

    run = trained / "runs" / RUN
    done = subprocess.run([sys.executable, "-m", "vsplit.cli.main", "report", "--run", str(run), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "valid; merged with 2 partner report(s)" in done.stdout
    merged = json.loads((run / "bank" / "report-merged.json").read_text())
    result = _result(trained, "bank")
    model = merged["model"]
    assert model["kind"] == "ensemble" and model["weight"] == reference.weight_ == result["weight"]
    assert model["networks"] == NETWORKS and model["second"] == "trees" and model["refit"] is True
    assert model["trees"] == result["trees"] and model["weight_scores"] == result["weight_scores"]
    assert model["validation_auc"] == result["validation_auc"]
    assert merged["metrics"]["auc"] == result["test"]["auc"]
    alone = merged["baselines"]["label_party_only"]  # the bank's own model (networks/fallback.npz), same rows
    assert alone == result["baselines"]["label_party_only"] and alone["n_scored"] == result["test"]["n_scored"]
    assert 0 < alone["auc"] <= 1 and alone["model"] in ("network", "logistic_regression", "boosted_trees")
    assert merged["coverage"]["shared"]["n_scored"] == result["test"]["n_scored"]
    assert merged["coverage"]["bank_only"]["n_scored"] > 0  # the test customers a partner does not know
    assert model["parts"]["networks"]["auc"] == pytest.approx(result["test"]["networks_auc"], abs=1e-12)
    assert model["parts"]["trees"]["auc"] == pytest.approx(result["test"]["trees_auc"], abs=1e-12)
    low, high = merged["credit"]["bootstrap"]["auc"]
    assert low < merged["metrics"]["auc"] < high
    assert set(merged["communication"]) == set(NAMES) and len(merged["history"]) == len(result["history"]) > 0
    text = (run / "bank" / "report.md").read_text()
    assert "## Model (ensemble)" in text and f"{reference.weight_:g} x networks" in text
    assert "No bank-alone comparison" not in text and "| part alone |" in text and "| label party only |" in text
    from vsplit.report.card_record import read_card

    card = read_card(run / "bank" / "model_card.json")
    assert card["metrics"]["auc"] == pytest.approx(result["test"]["auc"], abs=1e-9)
    assert card["recipe"]["weight"] == str(reference.weight_) and card["recipe"]["networks"] == str(NETWORKS)
    assert card["trees"]["kept"] == result["trees"] and set(card["trees"]["splits"]) == set(NAMES)
    assert any(c.startswith("trees: one decision bit") for c in card["topology"]["cuts"])
    assert "ensemble" in (run / "bank" / "model_card.md").read_text()


def test_vsplit_predict_equals_split_ensemble_in_one_process(trained, reference):
    got, scored, test, ids = predicted(trained, RUN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # customers a partner does not know: NaN
        expected = pd.Series(reference.predict_proba(test)[:, 1], index=ids)
        trees = pd.Series(reference.trees_.predict_proba(test)[:, 1], index=ids)
    assert len(scored) == int(expected.notna().sum()) > 100
    np.testing.assert_allclose(scored.to_numpy(), expected[scored.index].to_numpy(), rtol=0, atol=1e-5)
    assert (got["status"] != "scored").sum() == len(ids) - len(scored)  # the others are listed,
    assert (got.loc[got["status"] != "scored", "model"] == "bank_only").all()  # and scored by the bank alone
    if 0 < reference.weight_ < 1:  # the combination is neither part alone
        assert np.abs(scored.to_numpy() - trees[scored.index].to_numpy()).max() > 1e-3


def test_three_processes_with_ordered_categories_equal_split_ensemble_in_one_process(tmp_path):
    """``[boosting] order_categories = true`` and ``[ensemble] weight_rule = "one_se"``: the trees' renumbering
    happens inside the ensemble's run too, the bank chooses the weight by the one-standard-error rule; the weight and
    ``vsplit predict``'s probabilities equal ``SplitEnsemble(order_categories=True, weight_rule="one_se")`` in one
    process."""
    run = "ens-ordered"
    extra = EXTRA.replace("[boosting]\n", "[boosting]\norder_categories = true\n").replace(
        "[ensemble]\n", '[ensemble]\nweight_rule = "one_se"\n')
    train_then_predict(tmp_path, run, extra=extra)
    reference = in_memory(tmp_path, order_categories=True, weight_rule="one_se")
    result = _result(tmp_path, "bank", run)
    assert result["weight"] == reference.weight_ and result["weight_rule"] == "one_se"
    report = (tmp_path / "runs" / run / "bank" / "report.md").read_text()
    assert "rule: the weight nearest 0.5 within one standard error of the best AUC" in report
    assert [w for w, _ in result["weight_scores"]] == sorted(reference.weight_scores_)
    np.testing.assert_allclose([a for _, a in result["weight_scores"]],
                               [reference.weight_scores_[w] for w in sorted(reference.weight_scores_)], atol=1e-6)
    state = load_checkpoint(tmp_path / "runs" / run / "shop" / "trees" / "model.npz", run_id=run, party="shop")
    assert np.array_equal(state["bins"]["ranks"], reference.trees_.bins_["shop"].ranks)
    _, scored, test, ids = predicted(tmp_path, run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = pd.Series(reference.predict_proba(test)[:, 1], index=ids)
    assert len(scored) > 100
    np.testing.assert_allclose(scored.to_numpy(), expected[scored.index].to_numpy(), rtol=0, atol=1e-5)


def test_an_ensemble_refuses_resume_before_reaching_any_peer(trained):
    from vsplit.node import PartyNode

    config = load_config(trained / "bank" / "party.toml")
    with pytest.raises(CheckpointError, match="--resume does not resume an ensemble"):
        PartyNode(config, resume=True, progress=False).before_connect()


@pytest.mark.parametrize(("override", "expected"), [
    ("ensemble.weight_fraction=0", "ensemble.weight_fraction: 0(.0)? is out of range"),
    ("ensemble.weights=[0.5, 2.0]", "ensemble.weights: .* in \\[0, 1\\]"),
    ("ensemble.weight=1.5", "ensemble.weight: 1.5"),
    ("ensemble.networks=0", "ensemble.networks: 0 is out of range"),
    ("train.networks=2", "train.networks: an ensemble's bag is ensemble.networks"),
    ("boosting.max_depth=0", "boosting.max_depth: 0 is out of range"),
])
def test_bad_ensemble_settings_are_refused_naming_the_key(trained, override, expected):
    with pytest.raises(ConfigError, match=expected):
        load_config(trained / "bank" / "party.toml", overrides=[override])


# -- serving: the bank's scorer and the partners' daemons joined in one process over memory links --------------------


def test_served_scores_equal_vsplit_predict_with_one_partner_round_trip_for_both_parts(trained):
    """Live mode: each partner answers every batch once, its embeddings and its decision bits side by side."""
    from vsplit.serve import messages as m
    from vsplit.transport.codec import decode

    with served(trained, RUN) as out:
        assert sorted(out.served.index) == sorted(out.expected.index) and len(out.served) > 100
        np.testing.assert_allclose(out.served.to_numpy(), out.expected[out.served.index].to_numpy(), rtol=0,
                                   atol=1e-6)
        # the customers a partner does not know: the bank's own model (networks/fallback.npz), as vsplit predict
        batch = pd.read_csv(trained / "runs" / RUN / "bank" / "predictions" / "j1" / "predictions.csv",
                            dtype={"customer_id": str}).set_index("customer_id")
        alone = {s.id: s.score for s in out.scored if s.id not in out.served.index}
        assert alone and all(s.model == "bank_only" for s in out.scored if s.id in alone)
        assert (batch.loc[list(alone), "model"] == "bank_only").all()
        np.testing.assert_allclose(list(alone.values()), batch.loc[list(alone), "probability"], rtol=0, atol=1e-6)
        for p, (_, partner_tap) in out.taps.items():
            replies = [a for a in (decode(f)[1] for f in partner_tap.frames) if isinstance(a, m.EmbedReply)]
            assert len(replies) == out.batches  # one answer per batch serves the networks and the trees
            networks = out.version.networks.partners[p][1]
            records = len(out.daemons[p].models[RUN].trees.node.model.columns)
            for reply in replies:
                assert reply.values.dtype == np.float32 and reply.values.shape[1] == networks + records
                assert set(np.unique(reply.values[:, networks:]).tolist()) <= {0.0, 1.0}


@pytest.fixture(scope="module")
def explained(trained) -> dict:
    """``vsplit explain``'s code (explain_party) at every party on its test table, in threads over memory channels:
    each party's explain.json."""
    from _serving_support import _channels, _in_threads

    from vsplit.explain.process import explain_party

    channels = _channels()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SMALL_KEYS_ENV, "1")
        configs = {p: load_config(trained / p / "party.toml", overrides=SETS[1::2]) for p in NAMES}
        return _in_threads({p: (lambda p=p: explain_party(configs[p], trained / p / "data" / "test.parquet",
                                                          job="e1", channels=channels[p])) for p in NAMES})


def test_vsplit_explain_gives_the_combinations_contributions_as_split_ensemble_explains_them(trained, reference,
                                                                                             explained):
    """``vsplit explain`` at every party: the bank's per-row contributions of its columns and of each partner add up
    to the ensemble's log-odds of ``vsplit predict`` and equal SplitEnsemble.explain in one process."""
    from vsplit.ensemble import log_odds

    paths = explained
    folder = paths["bank"].parent
    got = pd.read_csv(folder / "explanations.csv", dtype={"customer_id": str}).set_index("customer_id")
    summary = json.loads(paths["bank"].read_text())
    assert summary["weight"] == reference.weight_ and summary["method"] == "ensemble"
    parts = [c for c in got.columns if c not in ("score", "baseline_score", "probability", "baseline_probability")]
    assert {"party:shop", "party:telco"} <= set(parts) and "age" in parts
    np.testing.assert_allclose(got[parts].sum(axis=1), got["score"] - got["baseline_score"], atol=1e-4)
    batch = pd.read_csv(trained / "runs" / RUN / "bank" / "predictions" / "j1" / "predictions.csv",
                        dtype={"customer_id": str}).set_index("customer_id")
    assert len(got) == int((batch["status"] == "scored").sum()) > 100
    np.testing.assert_allclose(got["score"], log_odds(batch.loc[got.index, "probability"].to_numpy()), atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = reference.explain(views(trained, "test")).table(id_column="customer_id").set_index("customer_id")
    np.testing.assert_allclose(got[parts].to_numpy(), expected.loc[got.index, parts].to_numpy(), atol=1e-4)
    for p in NAMES[1:]:  # a partner keeps each network's attributions of its own columns
        local = json.loads(paths[p].read_text())
        assert local["rows"] == len(got) and "attributions.csv" in local["attributions"]


def test_parties_configured_with_other_ensemble_settings_refuse_each_other_naming_the_key(trained):
    """The parties' nodes in threads over memory channels: the shop does not refit; the bank stops before any PSI,
    naming the shop and the key, and the partners are told the settings disagree."""
    from _serving_support import _channels, in_threads_with_errors

    from vsplit.errors import ProtocolError, RemoteAbort
    from vsplit.node import PartyNode

    sets = {"shop": ["ensemble.refit=false"]}
    nodes = {p: PartyNode(load_config(trained / p / "party.toml", overrides=[
        *SETS[1::2], "output.run_id=mixed", 'data.test_path=""', *sets.get(p, [])]), progress=False) for p in NAMES}
    channels = _channels()
    _, errors = in_threads_with_errors({p: (lambda p=p: nodes[p].run(channels[p])) for p in NAMES}, timeout=60)
    assert isinstance(errors.get("bank"), ProtocolError), errors
    assert "'shop'" in str(errors["bank"]) and "ensemble.refit = false" in str(errors["bank"])
    assert isinstance(errors.get("shop"), RemoteAbort) and "settings disagree" in str(errors["shop"])
    assert not (trained / "runs" / "mixed" / "bank" / "model.npz").exists()


# -- serving: the bank's HTTP service and the partners' daemons as OS processes over mutual TLS ----------------------


class EnsembleServe(ServeProcesses):
    """``vsplit serve`` of this run at each party: the bank's HTTP service and the partners' daemons."""

    def start(self, party: str, *extra: str) -> None:
        sets = [*SETS[1::2], f"serve.address=127.0.0.1:{self.link}", "serve.timeout_ms=5000", f"output.run_id={RUN}"]
        sets += [f"serve.http=127.0.0.1:{self.http}"] if party == "bank" else ['serve.table="data/test.parquet"']
        self.launch(party, ["serve", "--config", str(self.root / party / "party.toml")], [*sets, *extra])


def _serve_all(client, rows: list[dict]) -> pd.DataFrame:
    out = []
    for at in range(0, len(rows), 100):
        reply = client.post("/v1/score:batch", json={"rows": rows[at:at + 100]})
        assert reply.status_code == 200, reply.text
        out += reply.json()["results"]
    return pd.DataFrame(out).set_index("id")


def _as_predicted(served: pd.DataFrame, batch: pd.DataFrame) -> None:
    """Every customer served the probability ``vsplit predict`` gave it, by the same model: the split ensemble where
    every partner knows the customer, else the bank's own model (the run's fallback)."""
    scored = batch.index[batch["status"] == "scored"]
    assert 100 < len(scored) < len(batch) and sorted(served.index) == sorted(batch.index)
    assert (served.loc[scored, "model"] == "split").all() and not served.loc[scored, "fallback"].any()
    rest = served.drop(index=scored)
    assert (rest["model"] == "bank_only").all() and rest["fallback"].all()
    assert (batch.loc[rest.index, "model"] == "bank_only").all()
    np.testing.assert_allclose(served["score"].astype(float), batch.loc[served.index, "probability"], rtol=0,
                               atol=1e-6)


def _check_reasons(client, rows: list[dict], trained, explained: dict, batch: pd.DataFrame, k: int = 2) -> None:
    """``"reasons": k`` on /v1/score:batch: every applicant the ensemble scored gets ``vsplit explain``'s reason
    codes of it (contributions within 1e-4, the float32 embeddings of serving), the others the bank model's; the
    answer is otherwise the plain one."""
    from _serving_support import explain_reasons

    table = pd.read_csv(explained["bank"].parent / "explanations.csv", dtype={"customer_id": str})
    expected = explain_reasons(trained / "bank" / "party.toml", table, k)
    picked = [r for r in rows if batch.loc[r["id"], "status"] == "scored"][:60] + \
        [r for r in rows if batch.loc[r["id"], "status"] != "scored"][:5]
    asked = client.post("/v1/score:batch", json={"rows": picked, "reasons": k})
    plain = client.post("/v1/score:batch", json={"rows": picked})
    assert asked.status_code == 200 and plain.status_code == 200, asked.text
    answers = asked.json()["results"]
    scored = [a for a in answers if a["model"] == "split"]
    assert len(scored) == 60 and all(a["model"] == "bank_only" and "reasons" in a for a in answers[60:])
    for answer in scored:
        want = expected[answer["id"]]
        assert [(r["code"], r["text"]) for r in answer["reasons"]] == [(r["code"], r["text"]) for r in want["reasons"]]
        np.testing.assert_allclose([r["contribution"] for r in answer["reasons"]],
                                   [r["contribution"] for r in want["reasons"]], rtol=0, atol=1e-4)
        assert answer["declined"] == want["declined"]
    codes = {c["code"] for a in scored for c in a["reasons"]}
    assert codes & {"party:shop", "party:telco"} and sum(len(a["reasons"]) == k for a in scored) > 20
    for before, after in zip(plain.json()["results"], answers, strict=True):
        assert {key: v for key, v in after.items() if key not in ("reasons", "declined")} == before


def test_bank_and_two_partner_processes_serve_the_ensemble_live_then_cached_as_vsplit_predict(trained, explained):
    """Three ``vsplit serve`` processes over mutual TLS: live, then the bank restarted in cached mode against the
    same partner daemons; each time every test customer's score is ``vsplit predict``'s; live, an applicant's reason
    codes are ``vsplit explain``'s of it (each network explained with the partners, the trees from the bits that
    scored it)."""
    import httpx
    from _pilot_support import free_port
    from test_boosting_serving import _frames_sent, _rows

    batch, _, test, _ = predicted(trained, RUN)
    parties = EnsembleServe(trained, http=free_port(), link=free_port())
    try:
        for p in (*NAMES[1:], "bank"):
            parties.start(p)
        client = httpx.Client(base_url=f"http://127.0.0.1:{parties.http}", timeout=30)
        health = parties.wait_ready(client)
        assert health == {"status": "ok", "mode": "live", "version": RUN,
                          "partners": {p: "connected" for p in NAMES[1:]}}
        (model,) = client.get("/v1/models").json()["models"]
        assert model["fallback"] is True and "age" in model["columns"]
        bank = test["bank"].assign(customer_id=test["bank"]["customer_id"].astype(str))
        rows = _rows(bank, list(model["columns"]))
        _as_predicted(_serve_all(client, rows), batch)
        assert _frames_sent(client) == {"ServeWelcome", "LoadVersion", "EmbedRequest"}  # live: keyed IDs
        _check_reasons(client, rows, trained, explained, batch)
        assert _frames_sent(client) == {"ServeWelcome", "LoadVersion", "EmbedRequest", "ExplainOpen", "ExplainStep"}

        assert parties.stop("bank") == 0
        parties.start("bank", "serve.mode=cached")
        assert parties.wait_ready(client)["mode"] == "cached"
        _as_predicted(_serve_all(client, rows), batch)
        assert _frames_sent(client) == {"ServeWelcome", "LoadVersion", "SnapshotAck"}  # no ID reaches a partner
    finally:
        parties.close()


def test_vsplit_explain_as_three_processes_over_tls_gives_split_ensembles_contributions(trained, reference):
    """``vsplit explain`` at the bank and both partners as OS processes over mutual TLS: the bank's per-party
    contributions of the combination equal SplitEnsemble.explain in one process."""
    from _pilot_support import start, wait_all

    logs = {p: trained / f"{p}-explain-tls.log" for p in NAMES}
    procs = {p: start(["explain", "--config", str(trained / p / "party.toml"), "--input",
                       str(trained / p / "data" / "test.parquet"), "--job", "e-tls", *SETS], log=logs[p])
             for p in NAMES}
    wait_all(procs, logs, timeout=180)
    (table,) = (trained / "runs" / RUN / "bank").rglob("e-tls/explanations.csv")
    got = pd.read_csv(table, dtype={"customer_id": str}).set_index("customer_id")
    parts = [c for c in got.columns if c not in ("score", "baseline_score", "probability", "baseline_probability")]
    assert {"party:shop", "party:telco"} <= set(parts) and len(got) > 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = reference.explain(views(trained, "test")).table(id_column="customer_id").set_index("customer_id")
    np.testing.assert_allclose(got[parts].to_numpy(), expected.loc[got.index, parts].to_numpy(), atol=1e-4)
