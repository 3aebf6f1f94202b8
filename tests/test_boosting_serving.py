"""`vsplit serve` of a boosting run: the bank's HTTP service and two partner daemons (shop, telco) as separate OS
processes over mutual TLS, live then cached, against `vsplit predict` of the same run; plus the frames tapped in
one process: a partner's answers hold its decision bits only (uint8 0/1, one per record), never a threshold, a bin
edge or a raw value.

The module fixture trains a small boosting run (5 trees of depth 3, 1024-bit test keys) in one process and scores the
bank's test customers with batch prediction.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from _boosting_support import batch_predict, explain_batch, small_keys, train_boosting
from _leaks import leaks
from _pilot_support import free_port
from _serving_support import ServeProcesses, close_joined, explain_reasons, joined_in_memory

from vsplit.config import load_config
from vsplit.transport.codec import decode

PARTNERS = ("shop", "telco")
RUN = "trees-1"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("boost-serving")
    with small_keys():
        train_boosting(root, RUN)
        batch = batch_predict(root, RUN)
        explained = explain_batch(root, RUN)
    test = pd.read_parquet(root / "bank" / "data" / "test.parquet")
    test["customer_id"] = test["customer_id"].astype(str)
    for p in PARTNERS:  # each partner serves its table of the customers the bank will score
        pd.read_parquet(root / p / "data" / "test.parquet").to_parquet(root / p / "data" / "serve.parquet")
    table = pd.read_csv(explained / "explanations.csv", dtype={"customer_id": str})
    return {"root": root, "test": test, "batch": batch, "explained": table,
            "declined": {r["id"]: r for r in json.loads((explained / "reasons.json").read_text())}}


@pytest.fixture(autouse=True)
def _small_keys(monkeypatch):
    from vsplit.config.boosting import SMALL_KEYS_ENV

    monkeypatch.setenv(SMALL_KEYS_ENV, "1")  # the configs name 1024-bit keys: tests only


def _rows(test: pd.DataFrame, columns: list[str]) -> list[dict]:
    return [{"id": r["customer_id"], "features": {c: r[c].item() if hasattr(r[c], "item") else r[c] for c in columns}}
            for r in test.to_dict("records")]


def _score_all(client: httpx.Client, rows: list[dict]) -> pd.DataFrame:
    out = []
    for at in range(0, len(rows), 200):
        reply = client.post("/v1/score:batch", json={"rows": rows[at:at + 200]})
        assert reply.status_code == 200, reply.text
        out += reply.json()["results"]
    return pd.DataFrame(out)


def _check_equal(served: pd.DataFrame, batch: pd.DataFrame) -> None:
    """Every scored customer as `vsplit predict` scores it; the others answered without a score, as it lists them."""
    both = served.merge(batch, left_on="id", right_on="customer_id", validate="one_to_one")
    assert len(both) == len(batch) > 100
    scored = both["status"] == "scored"
    assert 100 < scored.sum() < len(both)  # the test table has customers a partner does not know
    assert (both.loc[scored, "model_x"] == "split").all() and not both.loc[scored, "fallback"].any()
    assert float(np.abs(both.loc[scored, "score"] - both.loc[scored, "probability"]).max()) <= 1e-12
    rest = both[~scored]
    assert rest["score"].isna().all() and rest["model_x"].isna().all() and rest["fallback"].all()
    assert all(isinstance(u, list) and u for u in rest["unknown_to"])


def _check_reasons(client: httpx.Client, rows: list[dict], run: dict, k: int = 2) -> None:
    """Reason codes on ``/v1/score``: every scored applicant's are ``vsplit explain``'s of it (path attribution from
    the decision bits that scored it), declined or not; an applicant without a score has none; the answer is
    otherwise the plain one."""
    expected = explain_reasons(run["root"] / "bank" / "party.toml", run["explained"], k)
    asked = client.post("/v1/score:batch", json={"rows": rows[:200], "reasons": k})
    plain = client.post("/v1/score:batch", json={"rows": rows[:200]})
    assert asked.status_code == 200 and plain.status_code == 200, asked.text
    scored = [a for a in asked.json()["results"] if a["model"] == "split"]
    assert len(scored) > 100 and {a["id"] for a in scored} <= set(expected)
    for answer in scored:
        want = expected[answer["id"]]["reasons"]
        assert [(r["code"], r["text"]) for r in answer["reasons"]] == [(r["code"], r["text"]) for r in want]
        np.testing.assert_allclose([r["contribution"] for r in answer["reasons"]],
                                   [r["contribution"] for r in want], rtol=0, atol=1e-9)
        assert answer["declined"] == (answer["id"] in run["declined"])  # reasons.json: the declined ones
    assert sum(len(a["reasons"]) == k for a in scored) > 50
    assert {c["code"] for a in scored for c in a["reasons"]} & {"party:shop", "party:telco"}
    for before, after in zip(plain.json()["results"], asked.json()["results"], strict=True):
        assert {key: v for key, v in after.items() if key not in ("reasons", "declined")} == before
        assert ("reasons" in after) == (after["model"] == "split")


class Parties(ServeProcesses):
    """The serve processes of one test: the bank's HTTP service and the partners' daemons."""

    def start(self, party: str, *extra: str) -> None:
        sets = [f"serve.address=127.0.0.1:{self.link}", "serve.timeout_ms=3000", f"output.run_id={RUN}"]
        sets += [f"serve.http=127.0.0.1:{self.http}"] if party == "bank" else ['serve.table="data/serve.parquet"']
        args = ["serve", "--config", str(self.root / party / "party.toml")]
        self.launch(party, args, [*sets, *extra])



def _frames_sent(client: httpx.Client) -> set[str]:
    kinds = set()
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("vsplit_serve_frames_sent"):
            kinds.add(line.split('type="')[1].split('"')[0])
    return kinds


def test_bank_and_two_partner_processes_serve_the_trees_live_then_cached_as_batch_prediction(run):
    root = run["root"]
    parties = Parties(root, http=free_port(), link=free_port())
    try:
        for p in (*PARTNERS, "bank"):
            parties.start(p)
        client = httpx.Client(base_url=f"http://127.0.0.1:{parties.http}", timeout=30)
        health = parties.wait_ready(client)
        assert health == {"status": "ok", "mode": "live", "version": RUN,
                          "partners": {"shop": "connected", "telco": "connected"}}
        (model,) = client.get("/v1/models").json()["models"]
        assert model["columns"] == {"age": "numeric", "job": "categorical", "marital": "categorical",
                                    "education": "categorical"} and model["fallback"] is False
        rows = _rows(run["test"], list(model["columns"]))
        _check_equal(_score_all(client, rows), run["batch"])
        # a missing value has a bin of its own in trees: a null is scored, a wrong type is refused naming the field
        known = next(r for r in rows if r["id"] in set(run["batch"].query("status == 'scored'")["customer_id"]))
        reply = client.post("/v1/score", json={**known, "features": {**known["features"], "age": None}})
        assert reply.status_code == 200 and reply.json()["model"] == "split", reply.text
        reply = client.post("/v1/score", json={**known, "features": {**known["features"], "age": "forty"}})
        assert reply.status_code == 422 and reply.json()["error"]["field"] == "features.age"
        _check_reasons(client, rows, run)
        assert _frames_sent(client) == {"ServeWelcome", "LoadVersion", "EmbedRequest"}  # live: keyed IDs only

        # the same daemons serve the bank restarted in cached mode (they dial again): their decision bits
        assert parties.stop("bank") == 0
        parties.start("bank", "serve.mode=cached")
        assert parties.wait_ready(client)["mode"] == "cached"
        _check_equal(_score_all(client, rows), run["batch"])
        _check_reasons(client, rows, run)  # from the bits of the partners' snapshots: cached mode too
        assert _frames_sent(client) == {"ServeWelcome", "LoadVersion", "SnapshotAck"}  # no ID to a partner
        parties.procs.pop("telco").kill()  # a partner down: cached answers go on
        deadline = time.monotonic() + 10
        while client.get("/healthz").json()["partners"]["telco"] == "connected" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.post("/v1/score", json=known).json()["score"] is not None
    finally:
        parties.close()


# -- the frames, tapped in one process ---------------------------------------------------------------------------------




def _pair(root: Path, mode: str):
    """The bank's scorer and two partner daemons joined in one process; every frame each side sends is tapped."""
    common = [f"serve.mode={mode}", 'serve.table="data/serve.parquet"', f"output.run_id={RUN}"]
    return joined_in_memory(root / "bank" / "party.toml", {p: root / p / "party.toml" for p in PARTNERS}, common)


def _secrets(daemon) -> list[float]:
    """What a partner must never send: its bin edges and its raw values."""
    node = daemon.models[RUN].node
    table = pd.read_parquet(daemon.table_path)
    numbers = [float(v) for c in node.encoder.columns if c not in node.encoder.categories
               for v in table[c].dropna().head(50)]
    numbers += [float(v) for cut in node.bins.cuts for v in np.asarray(cut)[:20]]
    return [v for v in numbers if abs(v) > 1.5]


def test_tapped_partner_answers_are_decision_bits_only_and_equal_batch(run):
    from vsplit.serve import messages as m
    from vsplit.serve.scorer import Row

    root = run["root"]
    batch = run["batch"].set_index("customer_id")
    for mode in ("live", "cached"):
        scorer, taps, daemons = _pair(root, mode)
        try:
            deadline = time.monotonic() + 20
            while mode == "cached" and len(scorer.cache) < 2:  # both partners' snapshots
                assert time.monotonic() < deadline
                time.sleep(0.05)
            version = scorer.model
            rows = [Row(id=r["id"], features=r["features"])
                    for r in _rows(run["test"].head(64), list(version.columns))]
            scored = scorer.score(rows)
            got = pd.Series({s.id: s.score for s in scored if s.model == "split"})
            assert len(got) > 30
            assert np.abs(got.to_numpy() - batch.loc[got.index, "probability"].to_numpy()).max() <= 1e-12
            for p, (_, partner_tap) in taps.items():
                answers = [decode(f)[1] for f in partner_tap.frames]
                kind = m.EmbedReply if mode == "live" else m.Snapshot
                assert type(answers[0]) is m.ServeHello
                assert {type(a) for a in answers[1:]} == {kind, m.VersionLoaded}  # loaded: a run ID and digest
                records = version.partners[p][1]
                assert records == len(daemons[p].models[RUN].node.model.columns) > 0
                for answer in (a for a in answers if isinstance(a, kind)):
                    assert answer.values.dtype == np.uint8 and answer.values.shape[1] == records
                    assert set(np.unique(answer.values).tolist()) <= {0, 1}
                secrets = _secrets(daemons[p])
                assert len(secrets) > 20
                for answer, frame in zip(answers, partner_tap.frames, strict=True):
                    assert not leaks(answer, frame, secrets)  # no bin edge, no raw value of the partner
        finally:
            close_joined(taps, daemons)


def test_flat_forest_walk_equals_the_trees_walk_bit_for_bit(run):
    from vsplit.boosting.forest import Forest
    from vsplit.serve.boost_model import BoostBankModel, model_kind

    config = load_config(run["root"] / "bank" / "party.toml", overrides=[f"output.run_id={RUN}"])
    assert model_kind(config) == "boosting"
    bank = BoostBankModel.load(config)
    rng = np.random.default_rng(0)
    codes = bank.codes([r["features"] for r in _rows(run["test"].head(300), list(bank.columns))])
    model = bank.node.model
    bits = {k + 1: rng.integers(0, 2, (len(codes), n), dtype=np.uint8) for k, n in enumerate(bank.forest.records)}
    assert Forest.of(model).margins(own_codes=codes, decisions=bits).tobytes() == \
        model.margins(own_codes=codes, decisions=bits).tobytes()
    # the served encoding of the bank's columns equals the node's (a DataFrame through its encoder and bins)
    frame = run["test"].head(300)
    expected = bank.node.bins.transform(bank.node.encoder.transform(frame[list(bank.columns)]))
    assert np.array_equal(codes, expected)


def test_model_card_lists_the_trees_each_partys_splits_and_what_leaks(run):
    import re

    from vsplit.report.card_record import read_card
    from vsplit.runtime.checkpoint import load_checkpoint

    folder = run["root"] / "runs" / RUN / "bank"
    card = read_card(folder / "model_card.json")
    state = load_checkpoint(folder / "model.npz", run_id=RUN, party="bank")
    splits = np.asarray(state["splits"]).reshape(-1, 7)
    trees = card["trees"]
    assert trees["kept"] == trees["trained"] == int(state["n_trees"]) == 5 and 1 <= trees["depth"] <= 3
    assert trees["splits"] == {p: int((splits[:, 2] == k).sum()) for k, p in enumerate(("bank", *PARTNERS))}
    assert abs(sum(trees["share"].values()) - 1) < 1e-12 and trees["leaves"] == len(state["leaf_values"])
    assert card["recipe"]["max_depth"] == "3" and card["recipe"]["learning_rate"] == "0.3"
    notes = " ".join(card["privacy"]["notes"])
    assert "rows of every node" in notes and "owns each split" in notes
    text = (folder / "model_card.md").read_text()
    assert "## Trees" in text and "| shop |" in text and (folder / "model_card.html").is_file()
    repo = Path(__file__).resolve().parents[1]
    pages = set(re.findall(r"docs/[\w./-]+\.md", json.dumps(card)))
    assert pages and all((repo / p).is_file() for p in pages)  # every page the card names exists
