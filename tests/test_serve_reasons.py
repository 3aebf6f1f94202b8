"""Reason codes on ``/v1/score`` (``"reasons": k``): the same computation as ``vsplit explain``, over the serving link.

The module fixture trains one small three-party run (bank, shop, telco) in one process and runs ``vsplit explain``
(every party's ``explain_party``, over memory channels) on the applicants. Then:

- the bank's service and both partners' daemons as separate OS processes over mutual TLS give, for every applicant
  the split scored, the reason codes ``vsplit explain`` gives (its reasons.json for the declined ones, its
  attributions for the others), and for the applicants the bank-only fallback scored the bank model's own; a request
  without ``reasons`` is answered as before; a bad ``reasons`` value is a 422 naming the field;
- the frames, tapped in one process: a partner answers an explanation with its path activations and one number per
  applicant (no column name, no column value of its own), and the bank sends it no bank column value and no score.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from _pilot_support import free_port, start
from _serving_support import Tap, explain_reasons, quietly, train_run
from _three_party_support import COLUMNS, PARTNERS

from vsplit.config import load_config
from vsplit.transport.codec import decode
from vsplit.transport.memory import memory_pair

K = 3
APPLICANTS = 60


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    from vsplit.explain.process import explain_party

    root = tmp_path_factory.mktemp("serve-reasons")
    train_run(root, "r1", seed=0)
    for p in PARTNERS:  # each partner serves (and explains) its table of the customers the bank will score
        pd.read_parquet(root / p / "data" / "test.parquet").to_parquet(root / p / "data" / "serve.parquet")
    applicants = pd.read_parquet(root / "bank" / "data" / "test.parquet").head(APPLICANTS)
    applicants["customer_id"] = applicants["customer_id"].astype(str)
    applicants.to_parquet(root / "bank" / "data" / "applicants.parquet", index=False)
    inputs = {"bank": root / "bank" / "data" / "applicants.parquet",
              **{p: root / p / "data" / "serve.parquet" for p in PARTNERS}}
    links = {p: memory_pair() for p in PARTNERS}
    channels = {"bank": {p: hub for p, (hub, _) in links.items()}, **{p: {"bank": end} for p, (_, end) in
                                                                        links.items()}}
    errors: list[BaseException] = []

    def explain(party: str) -> None:
        try:
            explain_party(load_config(root / party / "party.toml", overrides=["output.run_id=r1"]), inputs[party],
                          job="j", channels=channels[party])
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    threads = [threading.Thread(target=explain, args=(p,)) for p in COLUMNS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    folder = root / "runs" / "r1" / "bank" / "explanations" / "j"
    return {"root": root, "applicants": applicants,
            "table": pd.read_csv(folder / "explanations.csv", dtype={"customer_id": str}),
            "reasons": {r["id"]: r for r in json.loads((folder / "reasons.json").read_text())}}


def _rows(applicants: pd.DataFrame) -> list[dict]:
    columns = [c for c in COLUMNS["bank"] if c != "y"]
    return [{"id": r["customer_id"], "features": {c: r[c].item() if hasattr(r[c], "item") else r[c]
                                                  for c in columns}} for r in applicants.to_dict("records")]


def _explain_reasons(run: dict) -> dict[str, dict]:
    """``vsplit explain``'s reason codes of every applicant it explained, declined or not (from its attributions)."""
    return explain_reasons(run["root"] / "bank" / "party.toml", run["table"], K)


def _same(served: list[dict], expected: list[dict]) -> None:
    assert [(r["code"], r["text"]) for r in served] == [(r["code"], r["text"]) for r in expected]
    np.testing.assert_allclose([r["contribution"] for r in served], [r["contribution"] for r in expected],
                               atol=2e-6)


# -- separate OS processes over mutual TLS ---------------------------------------------------------------------------


def test_reasons_on_score_equal_vsplit_explain_over_tls_processes(run):
    root = run["root"]
    http, link = free_port(), free_port()
    procs, logs = {}, {}
    for party in (*PARTNERS, "bank"):
        sets = [f"serve.address=127.0.0.1:{link}", "serve.timeout_ms=3000", "output.run_id=r1"]
        sets += [f"serve.http=127.0.0.1:{http}"] if party == "bank" else ['serve.table="data/serve.parquet"']
        logs[party] = root / f"{party}-reasons.log"
        procs[party] = start(["serve", "--config", str(root / party / "party.toml"),
                              *[a for s in sets for a in ("--set", s)]], log=logs[party])
    client = httpx.Client(base_url=f"http://127.0.0.1:{http}", timeout=60)
    try:
        _wait_ready(client, procs, logs)
        rows = _rows(run["applicants"])
        plain = client.post("/v1/score:batch", json={"rows": rows})
        asked = client.post("/v1/score:batch", json={"rows": rows, "reasons": K})
        assert plain.status_code == 200 and asked.status_code == 200, asked.text
        plain_rows, asked_rows = plain.json()["results"], asked.json()["results"]
        expected, declined = _explain_reasons(run), run["reasons"]
        split = [r for r in asked_rows if r["model"] == "split"]
        alone = [r for r in asked_rows if r["model"] == "bank_only"]
        assert {r["id"] for r in split} == set(expected) and len(split) > 20 and alone
        assert {r["id"] for r in split if r["declined"]} == set(declined)  # reasons.json lists the declined ones
        for answer in split:
            _same(answer["reasons"], expected[answer["id"]]["reasons"])
            if answer["declined"]:
                _same(answer["reasons"], declined[answer["id"]]["reasons"])
            assert len(answer["reasons"]) <= K
        assert sum(len(a["reasons"]) == K for a in split) > 10
        _bank_model_reasons(root, rows, alone)
        # without "reasons": the answer of before, field for field; with them: the same plus reasons and declined
        for before, after in zip(plain_rows, asked_rows, strict=True):
            assert "reasons" not in before and "declined" not in before
            assert {k: v for k, v in after.items() if k not in ("reasons", "declined")} == before
        one = client.post("/v1/score", json={**rows[0], "reasons": 1})
        assert one.status_code == 200 and len(one.json()["reasons"]) <= 1
        assert client.post("/v1/score", json=rows[0]).json() == plain_rows[0]
        for bad in (0, 11, "3", True, None, 2.5, [3]):
            for path, body in (("/v1/score", {**rows[0], "reasons": bad}),
                               ("/v1/score:batch", {"rows": rows[:2], "reasons": bad})):
                reply = client.post(path, json=body)
                assert reply.status_code == 422 and reply.json()["error"]["field"] == "reasons", (bad, reply.text)
        schema = client.get("/openapi.json").json()["paths"]["/v1/score"]["post"]["requestBody"]
        assert schema["content"]["application/json"]["schema"]["properties"]["reasons"]["maximum"] == 10
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait(timeout=10)




def _wait_ready(client: httpx.Client, procs: dict, logs: dict, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            assert proc.poll() is None, f"{name} exited:\n{logs[name].read_text()[-3000:]}"
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("not ready: " + "\n".join(f"{n}: {p.read_text()[-1500:]}" for n, p in logs.items()))


def _bank_model_reasons(root: Path, rows: list[dict], alone: list[dict]) -> None:
    """The applicants the fallback scored get the bank model's own reasons: its columns only, from its model."""
    from vsplit.serve.model import BankModel
    from vsplit.serve.reasons import reason_records

    config = load_config(root / "bank" / "party.toml", overrides=["output.run_id=r1"])
    version = BankModel.load(config)
    by_id = {r["id"]: r for r in rows}
    expected = reason_records(config, version.explain_alone([by_id[a["id"]]["features"] for a in alone]), K)
    for answer, mine in zip(alone, expected, strict=True):
        assert answer["declined"] == mine["declined"]
        assert not any(r["code"].startswith("party:") for r in answer["reasons"])
        _same(answer["reasons"], mine["reasons"])


def test_the_service_scores_and_explains_with_the_banks_booster_as_batch_prediction_does(run):
    """Where the bank's own booster scores the customers a partner does not know, the service's bank-only path scores
    them as ``vsplit predict``'s fallback does and explains them with the booster's reasons, which add up."""
    import dataclasses

    from vsplit.app.fallback import BOOSTER, score_bank_only
    from vsplit.serve.model import BankModel

    config = load_config(run["root"] / "bank" / "party.toml", overrides=["output.run_id=r1"])
    version = BankModel.load(config)
    assert version.fallback is not None and version.fallback.booster is not None  # LightGBM: in the dev install
    version.fallback = dataclasses.replace(version.fallback, chosen=BOOSTER)
    rows = [r["features"] for r in _rows(run["applicants"])]
    served = version.score_alone(rows)
    frame = run["applicants"].drop(columns=["y"])
    np.testing.assert_allclose(served, score_bank_only(version.fallback, frame), rtol=0, atol=1e-12)
    explanation = version.explain_alone(rows)
    assert explanation.note.startswith("the bank's booster")
    assert np.abs(explanation.completeness_error()).max() < 1e-6


def test_reasons_in_cached_mode_are_refused_409_naming_the_field(run):
    from vsplit.serve.reasons import ReasonsRefused, check_reasons

    config = load_config(run["root"] / "bank" / "party.toml", overrides=["serve.mode=cached"])
    with pytest.raises(ReasonsRefused, match="live mode") as caught:
        check_reasons(config, None)
    assert caught.value.status == 409 and caught.value.code == "reasons_need_live_mode"


# -- the frames, tapped in one process ---------------------------------------------------------------------------------




def _numbers(messages: list) -> np.ndarray:
    """Every floating-point number the messages carry, those of the explanation messages they wrap too (but the
    knots' positions on the path, from 0 to 1)."""
    out = []
    for msg in messages:
        for name, value in vars(msg).items():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and name != "alphas":
                out.append(value.astype(np.float64).ravel())
        if getattr(msg, "frame", None) is not None and len(msg.frame):
            out.append(_numbers([decode(msg.frame.tobytes())[1]]))
    return np.concatenate(out) if out else np.zeros(0)


def test_tapped_partner_answers_an_explanation_with_one_number_per_applicant_and_no_value(run):
    from vsplit.errors import ProtocolError
    from vsplit.explain.messages import ExplainRequest, GroupAttribution
    from vsplit.serve import messages as m
    from vsplit.serve.links import PartnerLink
    from vsplit.serve.partner import PartnerDaemon
    from vsplit.serve.reasons import ReasonsRefused, explain_network, explain_split, reasons_for
    from vsplit.serve.scorer import Row, Scorer
    from vsplit.serve.wire import Wire, serve_session

    root = run["root"]
    common = ["serve.mode=live", 'serve.table="data/serve.parquet"', "output.run_id=r1"]
    config = load_config(root / "bank" / "party.toml", overrides=common)
    scorer = Scorer(config)
    to_bank, to_partner, daemons = {}, {}, []
    for p in PARTNERS:
        hub, end = memory_pair()
        to_partner[p], to_bank[p] = Tap(hub), Tap(end)
        daemon = PartnerDaemon(load_config(root / p / "party.toml", overrides=common))
        threading.Thread(target=quietly, args=(daemon.serve, to_bank[p]), daemon=True).start()
        wire = Wire(to_partner[p], peer=p, session=serve_session("bank", p))
        wire.send(scorer.admit(wire.recv(10)))
        scorer.connected(PartnerLink(wire, on_message=scorer.on_message))
        daemons.append(daemon)
    try:
        rows = [Row(id=r["id"], features=r["features"]) for r in _rows(run["applicants"])]
        scored = scorer.score(rows)
        split = [i for i, s in enumerate(scored) if s.model == "split"]
        before = {p: (len(to_bank[p].frames), len(to_partner[p].frames)) for p in PARTNERS}
        extra = reasons_for(config, scorer.versions, scorer.links, rows, scored, K)
        expected = _explain_reasons(run)
        for i in split:
            _same(extra[i]["reasons"], expected[scored[i].id]["reasons"])
        bank_values = [s.score for s in scored] + [float(v) for r in rows for v in r.features.values()
                                                   if isinstance(v, int | float) and not isinstance(v, bool)]
        for p in PARTNERS:
            sent = [decode(f)[1] for f in to_bank[p].frames[before[p][0]:]]
            assert sent and all(isinstance(s, m.ExplainStep) and not s.code for s in sent)
            inner = [decode(s.frame.tobytes())[1] for s in sent]
            kinds = {type(x).__name__ for x in inner}
            assert kinds in ({"KnotActivations", "GroupAttribution"}, {"PathActivations", "GroupAttribution"}), kinds
            (group,) = [x for x in inner if isinstance(x, GroupAttribution)]
            assert group.totals.shape == (len(split),) and group.top.shape == (len(split), 0) and group.names == ""
            served = pd.read_parquet(root / p / "data" / "serve.parquet").set_index("customer_id")
            mine = served.loc[[scored[i].id for i in split], [c for c in COLUMNS[p] if c in served.columns]]
            numbers = [float(v) for v in mine.select_dtypes("number").to_numpy().ravel() if v != 0]
            assert numbers and not np.isin(_numbers(sent), numbers).any()  # no value of its columns
            assert not any(c.encode() in f for c in mine.columns for f in to_bank[p].frames[before[p][0]:])
            asked = [decode(f)[1] for f in to_partner[p].frames[before[p][1]:]]
            assert isinstance(asked[0], m.ExplainOpen) and len(asked[0].keys) == len(split)
            assert isinstance(decode(asked[1].frame.tobytes())[1], ExplainRequest)
            assert not np.isin(_numbers(asked), bank_values).any()  # no bank column value, no score
        # a customer a partner does not know: it refuses with a code, the bank answers 502 naming it
        with pytest.raises(ReasonsRefused, match="does not know a customer") as caught:
            explain_split(scorer.model, scorer.links, [rows[split[0]].features], m.id_keys(["nobody"], run_id="r1"),
                          timeout_s=30)
        assert caught.value.status == 502 and caught.value.party in PARTNERS
        # a network this run has not (it has one; an ensemble's bag names its networks): refused with a code
        model = scorer.model
        with pytest.raises(ReasonsRefused, match="malformed request") as caught:
            explain_network(model, scorer.links, [rows[split[0]].features],
                            m.id_keys([scored[split[0]].id], run_id="r1"), party=model.node.party,
                            topology=model.node.topology, network=1, timeout_s=30)
        assert caught.value.status == 502
        with pytest.raises(ProtocolError, match="network must be 0 to 63"):
            m.ExplainOpen(request=1, run_id="r1", keys=m.id_keys(["a"], run_id="r1"), network=64)
    finally:
        for daemon in daemons:
            daemon.close()
        for p in PARTNERS:
            to_partner[p].close()


def test_an_explanation_step_out_of_order_of_another_session_or_the_wrong_way_is_refused():
    from vsplit.errors import ProtocolError
    from vsplit.explain.messages import GroupAttribution, PathGradients
    from vsplit.serve.explain_link import FROM_BANK, FROM_PARTNER, unwrap, wrap

    group = GroupAttribution(chunk=0, totals=np.zeros(2), top=np.zeros((2, 0), np.int32), names="")
    step = wrap(1, group, session=b"s" * 16, seq=0)
    assert unwrap(step, session=b"s" * 16, seq=0, allowed=FROM_PARTNER).totals.tolist() == [0.0, 0.0]
    with pytest.raises(ProtocolError, match="out of order"):
        unwrap(step, session=b"s" * 16, seq=1, allowed=FROM_PARTNER)
    with pytest.raises(ProtocolError, match="another session"):
        unwrap(step, session=b"t" * 16, seq=0, allowed=FROM_PARTNER)
    with pytest.raises(ProtocolError, match="not an explanation message this side accepts"):
        unwrap(step, session=b"s" * 16, seq=0, allowed=FROM_BANK)  # a partner takes no group attribution
    gradients = PathGradients(cut=0, chunk=0, values=np.zeros((2, 3), np.float32))
    with pytest.raises(ProtocolError, match="not an explanation message"):
        unwrap(wrap(1, gradients, session=b"s" * 16, seq=0), session=b"s" * 16, seq=0, allowed=FROM_PARTNER)
