"""Online scoring (`vsplit serve`): the bank's HTTP service and two partner daemons as separate OS processes over
mutual TLS, in live then cached mode, against batch prediction of the same run; plus the frames tapped in one process.

The module fixture trains two versions of a small three-party run (bank, shop, telco) in one process and scores the
bank's test customers with batch prediction; the process tests then check that the service gives the same scores.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import signal
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from _leaks import leaks
from _pilot_support import free_port
from _serving_support import ServeProcesses, Tap, batch_predict, quietly, train_run

from vsplit.config import load_config
from vsplit.errors import TransportError
from vsplit.transport.codec import decode
from vsplit.transport.memory import memory_pair

PARTNERS = ("shop", "telco")
#: the bank's model-management token (serve.manage_token_file)
MANAGE = "m" * 32


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("serving")
    train_run(root, "v1", seed=0)
    train_run(root, "v2", seed=1)
    test = pd.read_parquet(root / "bank" / "data" / "test.parquet")
    test["customer_id"] = test["customer_id"].astype(str)
    return {"root": root, "test": test, "v1": batch_predict(root, "v1"), "v2": batch_predict(root, "v2")}


def _rows(test: pd.DataFrame, columns: list[str]) -> list[dict]:
    return [{"id": r["customer_id"], "features": {c: r[c].item() if hasattr(r[c], "item") else r[c] for c in columns}}
            for r in test.to_dict("records")]


def _columns(client: httpx.Client) -> list[str]:
    (model,) = [m for m in client.get("/v1/models").json()["models"] if m["active"]]
    return list(model["columns"])


def _score_all(client: httpx.Client, rows: list[dict]) -> pd.DataFrame:
    out = []
    for start_at in range(0, len(rows), 200):
        reply = client.post("/v1/score:batch", json={"rows": rows[start_at:start_at + 200]})
        assert reply.status_code == 200, reply.text
        out += reply.json()["results"]
    return pd.DataFrame(out)


def _check_equal(served: pd.DataFrame, batch: pd.DataFrame) -> None:
    both = served.merge(batch, left_on="id", right_on="customer_id", validate="one_to_one")
    assert len(both) == len(batch) > 100
    assert (both["model_x"].fillna("") == both["model_y"].fillna("")).all()
    assert set(both["model_x"]) == {"split", "bank_only"}  # the test table has customers a partner does not know
    assert float(np.abs(both["score"] - both["probability"]).max()) <= 1e-6
    assert (both["fallback"] == (both["model_x"] != "split")).all()


class Parties(ServeProcesses):
    """The serve processes of one test: the bank's HTTP service and the partners' daemons."""

    def start(self, party: str, *extra: str, run_id: str = "v1") -> None:
        sets = [f"serve.address=127.0.0.1:{self.link}", "serve.timeout_ms=1500", "serve.reload_s=0.2"]
        if party == "bank":  # model management on, with its own token (the swap below loads v2)
            manage = self.root / "bank" / "manage.txt"
            manage.write_text(MANAGE + "\n")
            manage.chmod(0o600)
            sets += [f"serve.http=127.0.0.1:{self.http}", "serve.manage=true", 'serve.manage_token_file="manage.txt"']
        else:  # a partner serves only the runs its config names (the swap loads v2)
            sets += ['serve.table="data/serve.parquet"', 'serve.runs=["v1", "v2"]']
        args = ["serve", "--config", str(self.root / party / "party.toml"), "--run-id", run_id]
        self.launch(party, args, [*sets, *extra])

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.http}", timeout=30)



def _metric(client: httpx.Client, name: str) -> dict[str, float]:
    out = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def _serve_tables(root: Path) -> None:
    for p in PARTNERS:  # each partner serves its table of the customers the bank will score
        pd.read_parquet(root / p / "data" / "test.parquet").to_parquet(root / p / "data" / "serve.parquet")


def test_bank_and_two_partner_processes_live_then_cached_equal_batch_prediction(run, tmp_path):
    root = run["root"]
    _serve_tables(root)
    parties = Parties(root, http=free_port(), link=free_port())
    try:
        for p in (*PARTNERS, "bank"):
            parties.start(p)
        client = parties.client()
        health = parties.wait_ready(client)
        assert health == {"status": "ok", "mode": "live", "version": "v1",
                          "partners": {"shop": "connected", "telco": "connected"}}
        columns = _columns(client)
        rows = _rows(run["test"], columns)
        _check_equal(_score_all(client, rows), run["v1"])
        one = client.post("/v1/score", json=rows[0]).json()
        assert set(one) >= {"id", "score", "model", "fallback", "version"} and one["version"] == "v1"
        _bad_input_is_refused_naming_the_field(client, rows[0], columns)
        _stranger_is_refused(client, root, parties.link, tmp_path)
        sent = _metric(client, "vsplit_serve_frames_sent")  # live: hello answers, version loads, keyed-ID requests
        assert {k.split('type="')[1].rstrip('"}') for k in sent} == {"ServeWelcome", "LoadVersion", "EmbedRequest"}
        _swap_under_load_loses_no_request(parties, client, rows, run["v2"])

        # a partner that hangs: 503 naming it within the configured timeout (1.5 s), never a hang
        parties.procs["telco"].send_signal(signal.SIGSTOP)
        began = time.monotonic()
        reply = client.post("/v1/score", json=rows[0])
        assert reply.status_code == 503 and reply.json()["error"]["party"] == "telco", reply.text
        assert time.monotonic() - began < 2.5
        parties.procs["telco"].send_signal(signal.SIGCONT)
        _sigterm_drains_requests_in_flight(parties, rows)

        # the same partner daemons serve the bank restarted in cached mode (they dial again)
        parties.start("bank", "serve.mode=cached")
        assert parties.wait_ready(client)["mode"] == "cached"
        _check_equal(_score_all(client, rows), run["v1"])
        sent = _metric(client, "vsplit_serve_frames_sent")
        kinds = {k.split('type="')[1].rstrip('"}') for k in sent}
        assert kinds == {"ServeWelcome", "LoadVersion", "SnapshotAck"}, sent  # no ID ever goes to a partner
        _delta_reaches_the_bank(client, root, rows, run["v1"])

        # a partner down: cached answers go on
        parties.procs.pop("telco").kill()
        deadline = time.monotonic() + 10  # the bank sees the link drop when its reader gets the end of the stream
        while client.get("/healthz").json()["partners"]["telco"] == "connected" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.post("/v1/score", json=rows[1]).status_code == 200
        assert client.get("/healthz").json()["partners"]["telco"] == "cached"
    finally:
        parties.close()


def _bad_input_is_refused_naming_the_field(client: httpx.Client, row: dict, columns: list[str]) -> None:
    numeric = next(c for c in columns if isinstance(row["features"][c], int | float))
    bad = {**row, "features": {**row["features"], numeric: "forty"}}
    raw = {"content-type": "application/json"}
    cases = [
        (client.post("/v1/score", content=b'{"id": "1", "features": {', headers=raw), 400, "body"),
        (client.post("/v1/score", json=bad), 422, f"features.{numeric}"),
        (client.post("/v1/score", json={**row, "features": {**row["features"], "salary": 1}}), 422,
         "features.salary"),
        (client.post("/v1/score:batch", json={"rows": [row, {"id": "2"}]}), 422, f"rows[1].features.{columns[0]}"),
        (client.post("/v1/score", content=b" " * (600 * 1024), headers=raw), 413, "body"),
    ]
    for reply, status, field in cases:
        assert reply.status_code == status, reply.text
        assert reply.json()["error"]["field"] == field and field in reply.json()["error"]["message"]


def _stranger_is_refused(client: httpx.Client, root: Path, port: int, tmp_path: Path) -> None:
    """A new key claiming to be shop is refused at the serving port; the real partners stay connected."""
    from vsplit.transport.connect import dial
    from vsplit.transport.identity import create_identity, write_identity
    from vsplit.transport.pinning import Credentials

    stranger = write_identity(create_identity("shop"), tmp_path / "stranger")
    creds = Credentials.load("shop", own_cert=stranger.cert_path, own_key=stranger.key_path,
                             peers={"bank": root / "shop" / "keys" / "peers" / "bank.pem"})
    with pytest.raises(TransportError):
        dial(creds, peer="bank", address=("127.0.0.1", port), deadline_s=5)
    deadline = time.monotonic() + 5  # the bank records the refusal once its handshake thread has given up
    while _metric(client, "vsplit_serve_refused_connections")["vsplit_serve_refused_connections"] < 1:
        assert time.monotonic() < deadline, "the stranger's refusal was not counted"
        time.sleep(0.05)
    assert client.get("/healthz").json()["partners"] == {"shop": "connected", "telco": "connected"}


def _swap_under_load_loses_no_request(parties: Parties, client: httpx.Client, rows: list[dict],
                                      batch: pd.DataFrame) -> None:
    """Switch to v2 while four clients send requests: none fails, and new requests get v2's scores."""
    stop = threading.Event()
    statuses: list[int] = []

    def hammer() -> None:
        with parties.client() as c:
            i = 0
            while not stop.is_set():
                statuses.append(c.post("/v1/score", json=rows[i % len(rows)]).status_code)
                i += 1

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for _ in range(4):
            pool.submit(hammer)
        time.sleep(0.3)
        swapped = client.post("/v1/models", json={"run_id": "v2"}, headers={"authorization": f"Bearer {MANAGE}"})
        time.sleep(0.3)
        stop.set()
    assert swapped.status_code == 200, swapped.text
    assert [m["run_id"] for m in swapped.json()["models"] if m["active"]] == ["v2"]
    assert len(statuses) > 20 and set(statuses) == {200}, statuses[:50]
    _check_equal(_score_all(client, rows), batch)
    refused = client.post("/v1/models", json={"run_id": "v9"},  # no such run: refused, named
                          headers={"authorization": f"Bearer {MANAGE}"})
    assert refused.status_code == 422 and "v9" in refused.json()["error"]["message"]


def _sigterm_drains_requests_in_flight(parties: Parties, rows: list[dict]) -> None:
    """SIGTERM while requests are in flight (held at the bank by a paused partner): each request the bank took in
    gets its answer once the partner goes on, none is dropped, then the bank exits 0."""
    outcomes: list[object] = []

    def ask(i: int) -> None:
        with parties.client() as c:
            try:
                outcomes.append(c.post("/v1/score:batch", json={"rows": rows[i * 50:(i + 1) * 50]}).status_code)
            except httpx.ConnectError:  # sent after the bank stopped listening: never accepted
                outcomes.append("not accepted")
            except httpx.TransportError as exc:  # accepted, then dropped: what draining must prevent
                outcomes.append(repr(exc))

    deadline = time.monotonic() + 10  # both partners connected (telco was paused before)
    while parties.client().get("/healthz").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    parties.procs["telco"].send_signal(signal.SIGSTOP)
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.6)  # the requests wait at the bank for telco (serve.timeout_ms = 1500)
    stopping = concurrent.futures.ThreadPoolExecutor(1).submit(parties.stop, "bank")
    time.sleep(0.1)
    parties.procs["telco"].send_signal(signal.SIGCONT)
    assert stopping.result(timeout=60) == 0  # SIGTERM: drained, links closed, exit 0
    for t in threads:
        t.join(timeout=30)
    # the bank's access log: every request it took in was answered 200, as the clients saw; the others were in the
    # kernel's queue when it stopped listening (reset or refused, never read by the service)
    log = [json.loads(line) for line in parties.logs["bank"].read_text().splitlines() if line.startswith("{")]
    taken = [e["status"] for e in log if e["path"] == "/v1/score:batch" and e["rows"] == 50]
    assert taken and set(taken) == {200} and outcomes.count(200) == len(taken), (outcomes, taken)
    assert all(o == 200 or o == "not accepted" or "reset" in str(o) for o in outcomes), outcomes


def _delta_reaches_the_bank(client: httpx.Client, root: Path, rows: list[dict], batch: pd.DataFrame) -> None:
    """The shop's table changes: a delta reaches the bank; a customer it dropped is now scored by the fallback."""
    served = batch[batch["model"] == "split"]["customer_id"].iloc[0]
    table = pd.read_parquet(root / "shop" / "data" / "serve.parquet")
    table[table["customer_id"].astype(str) != served].to_parquet(root / "shop" / "data" / "serve.tmp.parquet")
    (root / "shop" / "data" / "serve.tmp.parquet").replace(root / "shop" / "data" / "serve.parquet")
    row = next(r for r in rows if r["id"] == served)
    deadline = time.monotonic() + 20
    while (answer := client.post("/v1/score", json=row).json())["model"] == "split":
        assert time.monotonic() < deadline, "the delta did not arrive"
        time.sleep(0.1)
    assert answer["model"] == "bank_only" and answer["unknown_to"] == ["shop"]


# -- the frames, tapped in one process ---------------------------------------------------------------------------------




def _pair(root: Path, mode: str):
    """The bank's scorer and two partner daemons joined in one process by tapped memory channels."""
    from vsplit.serve.links import PartnerLink
    from vsplit.serve.partner import PartnerDaemon
    from vsplit.serve.scorer import Scorer
    from vsplit.serve.wire import Wire, serve_session

    padding = 3 if mode == "live" else 1  # live: each asked ID hidden among 2 decoys
    common = [f"serve.mode={mode}", 'serve.table="data/serve.parquet"', f"serve.k_anonymity={padding}"]
    scorer = Scorer(load_config(root / "bank" / "party.toml", overrides=common))
    taps, daemons = {}, []
    for p in PARTNERS:
        hub, end = memory_pair()
        taps[p] = Tap(hub)
        daemon = PartnerDaemon(load_config(root / p / "party.toml", overrides=common))
        threading.Thread(target=quietly, args=(daemon.serve, end), daemon=True).start()
        wire = Wire(taps[p], peer=p, session=serve_session("bank", p))
        wire.send(scorer.admit(wire.recv(10)))
        scorer.connected(PartnerLink(wire, on_message=scorer.on_message))
        daemons.append(daemon)
    return scorer, taps, daemons


def test_tapped_frames_live_partner_never_gets_bank_columns_or_scores_cached_no_ids_after_snapshot(run, monkeypatch):
    from vsplit.serve import messages as m
    from vsplit.serve.encode import RowEncoder
    from vsplit.serve.scorer import Row

    root = run["root"]
    _serve_tables(root)
    for mode in ("live", "cached"):
        scorer, taps, daemons = _pair(root, mode)
        try:
            deadline = time.monotonic() + 20
            while mode == "cached" and len(scorer.cache) < 2:  # both partners' snapshots of v1
                assert time.monotonic() < deadline
                time.sleep(0.05)
            before = {p: len(t.frames) for p, t in taps.items()}
            columns = list(scorer.model.columns)
            rows = [Row(id=r["id"], features=r["features"]) for r in _rows(run["test"].head(64), columns)]
            scored = scorer.score(rows)
            batch = run["v1"].set_index("customer_id")
            assert np.abs(np.array([s.score for s in scored]) - batch.loc[[r.id for r in rows], "probability"]).max() \
                <= 1e-6
            values = [s.score for s in scored] + [v for r in rows for v in r.features.values()
                                                  if isinstance(v, int | float)]
            for p, tap in taps.items():
                after = [decode(f)[1] for f in tap.frames[before[p]:]]
                if mode == "cached":
                    assert after == [], after  # nothing at all goes to a partner when the bank scores
                    assert all(type(msg) in (m.ServeWelcome, m.LoadVersion, m.SnapshotAck)
                               for msg in map(lambda f: decode(f)[1], tap.frames))
                else:
                    (request,) = after  # one request for the whole micro-batch, each ID among 2 decoys (k = 3),
                    asked = {k.tobytes() for k in request.keys}  # each key once (two applicants may share one)
                    assert isinstance(request, m.EmbedRequest) and len(asked) == len(request.keys) > 2 * len(rows)
                    assert {k.tobytes() for k in m.id_keys([r.id for r in rows], run_id="v1")} <= asked
                for frame in tap.frames[before[p]:]:
                    assert not leaks(decode(frame)[1], frame, values)  # no score, no bank column value
            if mode == "cached":  # the label party's calibration (vsplit calibrate) applies as in vsplit predict
                _calibration_applies_to_split_scores(scorer, rows, scored)
            _hellos_and_snapshots_are_checked(scorer)
            # the table path (models trained with data.missing = "impute") scores the same
            monkeypatch.setattr(RowEncoder, "supports", staticmethod(lambda prep: False))
            again = scorer.score(rows)
            monkeypatch.undo()
            assert max(abs(a.score - b.score) for a, b in zip(again, scored, strict=True)) <= 1e-6
        finally:
            for daemon in daemons:
                daemon.close()
            for tap in taps.values():
                tap.close()


def _calibration_applies_to_split_scores(scorer, rows, scored) -> None:
    from vsplit.explain.calibration import FILE, Calibrator
    from vsplit.serve.model import BankModel
    from vsplit.serve.scorer import SPLIT

    calibrator = Calibrator(method="temperature", temperature=2.0)
    model = scorer.model
    path = calibrator.save(model.node.folder / FILE)
    try:
        assert BankModel.load(model.node.config, "v1").calibrator == calibrator
    finally:
        path.unlink()
    model.calibrator = calibrator
    try:
        again = scorer.score(rows)
    finally:
        model.calibrator = None
    split = [i for i, s in enumerate(scored) if s.model == SPLIT]
    assert split, "no row scored by the split"
    want = calibrator.apply(np.array([scored[i].score for i in split]))
    assert np.abs(np.array([again[i].score for i in split]) - want).max() <= 1e-9


def _hellos_and_snapshots_are_checked(scorer) -> None:
    """Another run, another digest or another party is refused at the hello; a snapshot whose signature does not
    verify is refused (acknowledged with ok = False) and changes nothing."""
    from vsplit.serve import messages as m

    digest = scorer.model.partners["shop"][2]
    assert scorer.admit(m.ServeHello(party="shop", run_id="v1", digest=digest)).ok
    assert scorer.admit(m.ServeHello(party="shop", run_id="v7", digest=digest)).code == m.VERSION_UNKNOWN
    assert scorer.admit(m.ServeHello(party="shop", run_id="v1", digest="0" * 32)).code == m.DIGEST_MISMATCH
    assert scorer.admit(m.ServeHello(party="bank", run_id="v1", digest=digest)).code == m.NOT_SERVED

    sent = []
    link = type("Link", (), {"name": "shop", "wire": type("W", (), {"send": staticmethod(sent.append)})()})()
    keys = m.id_keys(["forged"], run_id="v1")
    width = scorer.model.partners["shop"][1]
    held = dict(scorer.cache)
    forged = m.Snapshot(run_id="v1", seq=99, full=True, part=0, parts=1, keys=keys,
                        values=np.zeros((1, width), np.float32), removed=np.zeros((0, 16), np.uint8),
                        signature=np.frombuffer(b"not a signature", np.uint8).copy())
    scorer.on_message(link, forged)
    assert sent == [m.SnapshotAck(run_id="v1", seq=99, ok=False)] and scorer.cache == held


# -- the HTTP layer in one process -------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_api_requires_its_token_logs_no_values_and_names_a_partner_not_connected(run, tmp_path, caplog):
    import logging

    from fastapi.testclient import TestClient

    from vsplit.serve.http import make_app
    from vsplit.serve.service import BankService

    token = "t" * 32
    for policy in ("error", "fallback"):
        config = load_config(run["root"] / "bank" / "party.toml",
                             overrides=[f"serve.address=127.0.0.1:{free_port()}", f"serve.on_partner_down={policy}"])
        service = BankService(config)
        service.start()  # no partner ever connects
        columns = list(service.scorer.model.columns)
        row = _rows(run["test"].head(1), columns)[0]
        with TestClient(make_app(service, token=token)) as client, caplog.at_level(logging.INFO, "vsplit.serve"):
            assert client.post("/v1/score", json=row).status_code == 401
            assert client.post("/v1/score", json=row, headers={"authorization": "Bearer wrong"}).status_code == 401
            auth = {"authorization": f"Bearer {token}"}
            reply = client.post("/v1/score", json=row, headers=auth)
            if policy == "error":
                assert reply.status_code == 503 and reply.json()["error"]["party"] in PARTNERS
            else:  # the bank-only score, flagged, naming the partners that are down
                body = reply.json()
                assert reply.status_code == 200 and body["model"] == "bank_only" and body["fallback"] is True
                assert sorted(body["partners_down"]) == sorted(PARTNERS)
            assert client.get("/healthz", headers=auth).status_code == 503
            assert client.get("/healthz", headers=auth).json()["partners"] == {p: "down" for p in PARTNERS}
            assert "/v1/score" in client.get("/openapi.json", headers=auth).json()["paths"]
            assert client.get("/docs", headers=auth).status_code == 200
            metrics = client.get("/metrics", headers=auth).text
            assert 'vsplit_serve_requests_total{path="/v1/score",status="401"} 2' in metrics
        lines = [r.getMessage() for r in caplog.records if r.name == "vsplit.serve.access"]
        assert len(lines) >= 3
        for line in lines:
            assert row["id"] not in line and not any(str(v) in line.split('"client"')[0]
                                                     for v in row["features"].values() if isinstance(v, str))
        caplog.clear()


def test_https_api_requires_the_apps_client_certificate_and_the_queue_is_bounded(run, tmp_path):
    import ssl

    from vsplit.serve.run import serve_bank
    from vsplit.serve.scorer import Row
    from vsplit.serve.service import BankService, Overloaded
    from vsplit.transport.identity import create_identity, write_identity

    root = run["root"]
    app = write_identity(create_identity("app"), tmp_path / "app")
    http = free_port()
    config = load_config(root / "bank" / "party.toml", overrides=[
        f"serve.address=127.0.0.1:{free_port()}", f"serve.http=127.0.0.1:{http}", 'serve.http_cert="keys/bank.pem"',
        'serve.http_key="keys/bank.key"', f'serve.http_client_ca="{app.cert_path}"'])
    started = threading.Event()
    info: dict = {}
    thread = threading.Thread(target=serve_bank, args=(config,),
                              kwargs={"ready": lambda i: (info.update(i), started.set())}, daemon=True)
    thread.start()
    assert started.wait(60)
    try:
        context = ssl.create_default_context(cafile=str(root / "bank" / "keys" / "bank.pem"))
        context.check_hostname = False  # the bank's certificate names the party, not the host
        with pytest.raises(httpx.TransportError):  # no client certificate: the TLS handshake fails
            httpx.get(f"https://127.0.0.1:{http}/healthz", verify=context)
        context.load_cert_chain(str(app.cert_path), str(app.key_path))
        reply = httpx.get(f"https://127.0.0.1:{http}/healthz", verify=context)
        assert reply.status_code == 503 and reply.json()["partners"] == {p: "down" for p in PARTNERS}
    finally:
        info["server"].should_exit = True
        thread.join(timeout=30)
    assert not thread.is_alive()

    service = BankService(load_config(root / "bank" / "party.toml", overrides=["serve.max_queue=2"]))
    row = Row(id="1", features={})

    async def overfill() -> None:
        waiting = service.submit([row, row])  # not started: the rows wait
        with pytest.raises(Overloaded, match="max_queue"):
            service.submit([row])
        await asyncio.sleep(0.05)
        assert not waiting.done()

    asyncio.run(overfill())


# -- the numpy fast paths ----------------------------------------------------------------------------------------------


def test_numpy_forward_and_row_encoding_equal_pytorch_and_scikit_learn(run):
    import torch
    from sklearn.preprocessing import QuantileTransformer
    from torch import nn

    from vsplit.serve.encode import QuantileArithmetic
    from vsplit.serve.model import BankModel, encode_rows, forward
    from vsplit.serve.numpy_forward import compile_forward

    bank = BankModel.load(load_config(run["root"] / "bank" / "party.toml"))
    # the numpy path (this fixture trains the plain network; the recipe's piecewise embedding: the test below)
    assert bank.fast is not None and bank.fast_alone is not None
    columns = list(bank.columns)
    rows = [r["features"] for r in _rows(run["test"], columns)]
    rng = np.random.default_rng(0)
    received = {seg: rng.normal(size=(len(rows), width)).astype(np.float32) for seg, width, _ in bank.partners.values()}
    party = bank.node.party
    slow = forward(bank.node.topology, bank.name, bank.modules, encode_rows(party, rows, id_column="id"),
                   {k: torch.from_numpy(v) for k, v in received.items()}).numpy()
    fast = bank.fast(encode_rows(party, rows, id_column="id", arrays=True), received)
    assert fast.shape == slow.shape and float(np.abs(fast - slow).max()) <= 1e-6
    alone = bank.fallback
    slow = forward(alone.run, alone.party.name, alone.party.modules_for(alone.run, task_width=alone.party.task_width),
                   encode_rows(alone.party, rows, id_column="id"), {}).numpy()
    fast = bank.fast_alone(encode_rows(alone.party, rows, id_column="id", arrays=True), {})
    assert float(np.abs(fast - slow).max()) <= 1e-6
    # a module it does not know: PyTorch's forward is kept
    odd = {**bank.modules, "top": nn.Sequential(nn.Tanh())}
    assert compile_forward(bank.node.topology, bank.name, odd) is None

    # the quantile scaling, bit for bit, at the fitted range's ends and beyond it too
    x = np.round(rng.normal(size=(500, 3)) * 3)
    probes = np.concatenate([x[:50], rng.normal(size=(50, 3)) * 100, x.min(0, keepdims=True),
                             x.max(0, keepdims=True), x.min(0, keepdims=True) - 1e-9])
    for output in ("normal", "uniform"):
        scaler = QuantileTransformer(n_quantiles=40, output_distribution=output).fit(x)
        assert np.array_equal(QuantileArithmetic(scaler)(probes), scaler.transform(probes))


def test_numpy_forward_of_the_recipe_piecewise_bottom_equals_pytorch():
    """The default recipe's bottom (piecewise-linear numeric embeddings, rtdl version B) takes the numpy path too:
    a column of one value passes through, a two-valued one has one bin (no clamp), values far outside the bins."""
    import torch

    from vsplit.models.numeric import numeric_embedding
    from vsplit.models.tabular import TabularMLP
    from vsplit.serve.numpy_forward import Unsupported, module_function

    torch.manual_seed(0)
    num = torch.randn(300, 4)
    num[:, 2], num[:, 3] = 1.0, (num[:, 3] > 0).float()
    embedding = numeric_embedding("piecewise", num, width=8, n_bins=16)
    assert embedding.layer.impl.single_bin_mask is not None  # the two-valued column
    bottom = TabularMLP(cardinalities=[3, 5], n_numeric=4, hidden=(128,), out_dim=16, dropout=0.1,
                        numeric=embedding).eval()
    with torch.no_grad():  # trained-looking weights (the embedding's piecewise part starts at zero)
        for parameter in bottom.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    cat, x = torch.randint(0, 3, (64, 2)), torch.randn(64, 4) * 3
    x[:, 2] = 1.0
    want = bottom(cat, x).detach().numpy()
    got = module_function(bottom)(cat.numpy(), x.numpy())
    assert float(np.abs(got - want).max()) <= 1e-5 * max(1.0, float(np.abs(want).max()))
    with pytest.raises(Unsupported, match="Conv1d"):  # a module of one's own keeps PyTorch's forward
        module_function(torch.nn.Conv1d(1, 1, 1))


def test_periodic_numeric_embeddings_take_the_numpy_path_and_equal_pytorch():
    """A bag's periodic networks serve by numpy too: rtdl's periodic embedding (cos, sin, a linear map per feature,
    ReLU) with a constant column passed through, against PyTorch's forward."""
    import torch

    from vsplit.models.numeric import numeric_embedding
    from vsplit.models.tabular import TabularMLP
    from vsplit.serve.numpy_forward import module_function

    torch.manual_seed(1)
    num = torch.randn(300, 4)
    num[:, 2] = 1.0
    bottom = TabularMLP(cardinalities=[3, 5], n_numeric=4, hidden=(128,), out_dim=16, dropout=0.1,
                        numeric=numeric_embedding("periodic", num, width=8, n_bins=16)).eval()
    with torch.no_grad():  # frequencies far from their small start, so cos and sin really turn
        bottom.numeric.layer.periodic.weight.mul_(30)
    cat, x = torch.randint(0, 3, (64, 2)), torch.randn(64, 4) * 3
    want = bottom(cat, x).detach().numpy()
    got = module_function(bottom)(cat.numpy(), x.numpy())
    assert float(np.abs(got - want).max()) <= 1e-5 * max(1.0, float(np.abs(want).max()))
