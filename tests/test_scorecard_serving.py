"""`vsplit serve` of a scorecard run: the bank's HTTP service and two partner daemons (shop, telco) as separate OS
processes over mutual TLS, live then cached, against `vsplit predict` of the same run (probability, points and
reason codes); plus the frames tapped in one process: a partner's scoring answers are its points only (one float64
a customer), never a value, a bin edge, a WOE value or a coefficient.

The module fixture trains a small scorecard (6 steps, 1024-bit test keys) in one process over memory channels, the
same ScorecardNode code `vsplit train` runs over mutual TLS (tests/test_scorecard_processes.py), and scores the bank's
test customers with batch prediction. shop shares its attribute names, telco does not.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

import _boosting_support
from _boosting_support import batch_predict, small_keys, train_boosting
from _leaks import leaks
from _pilot_support import free_port, start
from _serving_support import close_joined, joined_in_memory
from test_boosting_serving import Parties, _frames_sent, _rows

from vsplit.transport.codec import decode

PARTNERS = ("shop", "telco")
RUN = "card-1"
EXTRA = """
[model]
kind = "scorecard"

[woe]
fine_bins = 8
key_bits = 1024
select_min_iv = 0.001

[scorecard]
iterations = 6
l2 = 0.01
key_bits = 1024
base_score = 500
reasons = 3
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("scorecard-serving")
    mp = pytest.MonkeyPatch()
    mp.setattr(_boosting_support, "EXTRA", EXTRA)
    try:
        with small_keys():
            _boosting_support.prepare(root, RUN)
            shop = root / "shop" / "party.toml"
            shop.write_text(shop.read_text() + "share_names = true\n")
            train_boosting(root, RUN)
            batch = batch_predict(root, RUN)
    finally:
        mp.undo()
    (points,) = (root / "runs" / RUN / "bank").rglob("points.csv")
    test = pd.read_parquet(root / "bank" / "data" / "test.parquet")
    test["customer_id"] = test["customer_id"].astype(str)
    for p in PARTNERS:  # each partner serves its table of the customers the bank will score
        pd.read_parquet(root / p / "data" / "test.parquet").to_parquet(root / p / "data" / "serve.parquet")
    return {"root": root, "test": test, "batch": batch,
            "points": pd.read_csv(points, dtype={"customer_id": str}).set_index("customer_id")}


@pytest.fixture(autouse=True)
def _small_keys(monkeypatch):
    from vsplit.config.boosting import SMALL_KEYS_ENV

    monkeypatch.setenv(SMALL_KEYS_ENV, "1")  # the configs name 1024-bit keys: tests only


class CardParties(Parties):
    """The serve processes of this run."""

    def start(self, party: str, *extra: str) -> None:
        sets = [f"serve.address=127.0.0.1:{self.link}", "serve.timeout_ms=5000", f"output.run_id={RUN}"]
        sets += [f"serve.http=127.0.0.1:{self.http}"] if party == "bank" else ['serve.table="data/serve.parquet"']
        args = ["serve", "--config", str(self.root / party / "party.toml")]
        for item in [*sets, *extra]:
            args += ["--set", item]
        self.logs[party] = self.root / f"{party}-serve-{len(self.logs)}.log"
        self.procs[party] = start(args, log=self.logs[party])


def _score_all(client: httpx.Client, rows: list[dict]) -> pd.DataFrame:
    out = []
    for at in range(0, len(rows), 250):
        reply = client.post("/v1/score:batch", json={"rows": rows[at:at + 250]})
        assert reply.status_code == 200, reply.text
        out += reply.json()["results"]
    return pd.DataFrame(out)


def _check_equal(served: pd.DataFrame, run: dict) -> None:
    """Every scored customer as `vsplit predict` scores it (probability and points); the others without a score."""
    both = served.merge(run["batch"], left_on="id", right_on="customer_id", validate="one_to_one")
    assert len(both) == len(run["batch"]) > 100
    scored = both["status"] == "scored"
    assert 100 < scored.sum() < len(both)  # the test table has customers a partner does not know
    assert (both.loc[scored, "model_x"] == "split").all() and not both.loc[scored, "fallback"].any()
    assert float(np.abs(both.loc[scored, "score"] - both.loc[scored, "probability"]).max()) <= 1e-12
    points = run["points"].loc[both.loc[scored, "id"], "score"].to_numpy()
    assert float(np.abs(both.loc[scored, "points"].to_numpy() - points).max()) <= 1e-9
    rest = both[~scored]
    assert rest["score"].isna().all() and rest["model_x"].isna().all() and rest["fallback"].all()


def _reasons(text: str) -> list[str]:
    """points.csv's reasons of a row as served codes: `bank:age (-3.1)` -> `age`, `shop:balance` -> `party:shop:...`."""
    out = []
    for entry in (e.strip() for e in (text if isinstance(text, str) else "").split(";") if e.strip()):
        party, attribute = entry.split(" (-")[0].split(":", 1)
        out.append(attribute if party == "bank" else f"party:{party}:{attribute}")
    return out


def test_bank_and_two_partner_processes_serve_the_scorecard_live_then_cached_as_batch_prediction(run):
    root = run["root"]
    parties = CardParties(root, http=free_port(), link=free_port())
    try:
        for p in (*PARTNERS, "bank"):
            parties.start(p)
        client = httpx.Client(base_url=f"http://127.0.0.1:{parties.http}", timeout=30)
        health = parties.wait_ready(client)
        assert health == {"status": "ok", "mode": "live", "version": RUN,
                          "partners": {"shop": "connected", "telco": "connected"}}
        (model,) = client.get("/v1/models").json()["models"]
        assert model["fallback"] is False and model["columns"]
        assert set(model["columns"]) <= {"age", "job", "marital", "education"}
        rows = _rows(run["test"], list(model["columns"]))
        _check_equal(_score_all(client, rows), run)
        assert _frames_sent(client) == {"ServeWelcome", "LoadVersion", "EmbedRequest"}  # live: keyed IDs

        # reason codes: vsplit predict's (points.csv), shop's attributes named, telco's by index only
        scored = set(run["batch"].query("status == 'scored'")["customer_id"])
        asked = [r for r in rows if r["id"] in scored][:40]
        reply = client.post("/v1/score:batch", json={"rows": asked, "reasons": 3})
        assert reply.status_code == 200, reply.text
        codes = []
        for answer in reply.json()["results"]:
            got = [r["code"] for r in answer["reasons"]]
            assert got == _reasons(run["points"].loc[answer["id"], "reasons"])
            assert all(r["contribution"] > 0 for r in answer["reasons"]) and isinstance(answer["declined"], bool)
            codes += got
        assert any(c.startswith("party:shop:") and "#" not in c for c in codes)
        assert any(c.startswith("party:telco:#") for c in codes)
        assert "ExplainOpen" in _frames_sent(client)

        # the same daemons serve the bank restarted in cached mode: their points from the snapshots
        assert parties.stop("bank") == 0
        parties.start("bank", "serve.mode=cached")
        assert parties.wait_ready(client)["mode"] == "cached"
        _check_equal(_score_all(client, rows), run)
        assert _frames_sent(client) == {"ServeWelcome", "LoadVersion", "SnapshotAck"}  # no ID to a partner
        reply = client.post("/v1/score", json={**asked[0], "reasons": 2})
        assert reply.status_code == 409 and reply.json()["error"]["code"] == "reasons_need_live_mode"
    finally:
        parties.close()


# -- the frames, tapped in one process ---------------------------------------------------------------------------------


def _pair(root: Path, mode: str):
    """The bank's scorer and two partner daemons joined in one process; every frame each side sends is tapped."""
    common = [f"serve.mode={mode}", 'serve.table="data/serve.parquet"', f"output.run_id={RUN}"]
    return joined_in_memory(root / "bank" / "party.toml", {p: root / p / "party.toml" for p in PARTNERS}, common)


def _secrets(daemon) -> list[float]:
    """What a partner must never send: its raw values, bin edges, WOE values and coefficients."""
    node = daemon.models[RUN].node
    table = pd.read_parquet(daemon.table_path)
    numbers = [float(v) for m in node.maps if m.fine.kind == "numeric" for v in table[m.name].dropna().head(50)]
    numbers += [float(v) for m in node.maps for v in [*np.asarray(m.fine.edges)[:20], *m.woe]]
    numbers += [float(c) for c in node.coef]
    return [v for v in numbers if abs(v) > 1.5 or 0.01 < abs(v) < 1]


def test_tapped_partner_answers_are_its_points_only_and_equal_batch(run):
    from vsplit.serve import messages as m
    from vsplit.serve.scorer import Row

    root = run["root"]
    for mode in ("live", "cached"):
        scorer, taps, daemons = _pair(root, mode)
        try:
            deadline = time.monotonic() + 20
            while mode == "cached" and len(scorer.cache) < 2:  # both partners' snapshots
                assert time.monotonic() < deadline
                time.sleep(0.05)
            version = scorer.model
            assert version.partners.keys() == set(PARTNERS) and {w for _, w, _ in version.partners.values()} == {1}
            rows = [Row(id=r["id"], features=r["features"])
                    for r in _rows(run["test"].head(64), list(version.columns))]
            scored = [s for s in scorer.score(rows) if s.model == "split"]
            assert len(scored) > 30
            points = run["points"].loc[[s.id for s in scored], "score"].to_numpy()
            assert np.abs(np.array([s.points for s in scored]) - points).max() <= 1e-9
            for p, (_, partner_tap) in taps.items():
                answers = [decode(f)[1] for f in partner_tap.frames]
                kind = m.EmbedReply if mode == "live" else m.Snapshot
                assert type(answers[0]) is m.ServeHello
                assert {type(a) for a in answers[1:]} == {kind, m.VersionLoaded}
                model = daemons[p].models[RUN]
                serving = pd.read_parquet(daemons[p].table_path)
                own = model.table.score(model.codes(serving))  # its points of every customer it serves
                for answer in (a for a in answers if isinstance(a, kind)):
                    assert answer.values.dtype == np.float64 and answer.values.shape[1] == 1
                    sent = answer.values[answer.known, 0] if mode == "live" else answer.values[:, 0]
                    assert len(sent) and np.isin(sent, own).all()  # nothing but its points
                secrets = _secrets(daemons[p])
                assert len(secrets) > 20
                for answer, frame in zip(answers, partner_tap.frames, strict=True):
                    assert not leaks(answer, frame, secrets)
        finally:
            close_joined(taps, daemons)
