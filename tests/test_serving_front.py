"""The bank's HTTP front against hostile callers (issue 45): header floods, a chunked body over the cap, idle and slow
connections, the token on every path, model management with its own credential.

One bank process serves a small trained run with no partner connected (the bank-only fallback answers scores), its
open-files soft limit lowered to 1,024 as many systems start a service; the attacks are raw sockets on 127.0.0.1,
each bounded in bytes and seconds. Model management's checks run in this process against the same run.
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest
from _pilot_support import REPO, free_port
from _serving_support import train_run

from vsplit.config import load_config
from vsplit.errors import ConfigError

TOKEN, MANAGE = "s" * 32, "m" * 32
AUTH, MANAGER = {"authorization": f"Bearer {TOKEN}"}, {"authorization": f"Bearer {MANAGE}"}
#: the bank's deadlines in these tests (the defaults are 10 s and 30 s)
DEADLINE_S = 2.0


def _secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("front")
    train_run(root, "v1")
    _secret(root / "bank" / "token.txt", TOKEN)
    _secret(root / "bank" / "manage.txt", MANAGE)
    return root


def _few_files() -> None:  # in the bank's child process, before it starts: a common default soft limit
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))


@pytest.fixture(scope="module")
def bank(root):
    port = free_port()
    sets = [f"serve.http=127.0.0.1:{port}", f"serve.address=127.0.0.1:{free_port()}", "serve.on_partner_down=fallback",
            'serve.token_file="token.txt"', "serve.manage=true", 'serve.manage_token_file="manage.txt"',
            f"serve.header_timeout_s={DEADLINE_S}", f"serve.body_timeout_s={DEADLINE_S}"]
    args = [sys.executable, "-m", "vsplit.cli.main", "serve", "--config", str(root / "bank" / "party.toml"),
            "--run-id", "v1"]
    for item in sets:
        args += ["--set", item]
    log = root / "bank-front.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, preexec_fn=_few_files,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=10)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                client.get("/healthz")  # 503: no partner; the bank-only fallback scores
                break
            except httpx.TransportError:
                time.sleep(0.2)
        (model,) = client.get("/v1/models").json()["models"]
        test = pd.read_parquet(root / "bank" / "data" / "test.parquet").head(1)
        row = {"id": str(test["customer_id"].iloc[0]),
               "features": {c: test[c].iloc[0].item() if hasattr(test[c].iloc[0], "item") else test[c].iloc[0]
                            for c in model["columns"]}}
        yield {"port": port, "client": client, "row": row, "log": log}
    finally:
        client.close()
        proc.kill()
        proc.wait(timeout=10)


def _metric(client: httpx.Client, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in client.get("/metrics").text.splitlines()
               if line.startswith(prefix))


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _answer(sock: socket.socket, *, wait: float) -> bytes:
    """What the server sent within ``wait`` seconds, up to its end of stream (a reset ends it too)."""
    sock.settimeout(wait)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except OSError:
        pass
    return got


def _flood_one_header(port: int, *, max_bytes: int = 8 << 20, max_s: float = 10.0) -> bytes:
    """A never-ending header value, 1 KiB per send, until the server answers (or the bounds): its answer."""
    with _connect(port) as sock:
        sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: bank\r\nX-Flood: ")
        sent, began, piece = 0, time.monotonic(), b"a" * 1024
        while sent < max_bytes and time.monotonic() - began < max_s:
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(piece)
            except OSError:
                break
            sent += len(piece)
        return _answer(sock, wait=5)


def _many_headers(port: int, *, count: int = 5000) -> bytes:
    with _connect(port) as sock:
        head = b"GET /healthz HTTP/1.1\r\nHost: bank\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(count))
        try:
            sock.sendall(head + b"\r\n")
        except OSError:
            pass
        return _answer(sock, wait=5)


def test_header_flood_answered_431_while_a_concurrent_client_is_scored(bank):
    answers: list[bytes] = []
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            answers.append(_flood_one_header(bank["port"]))

    floods = [threading.Thread(target=flood, daemon=True) for _ in range(3)]
    for t in floods:
        t.start()
    try:
        many = _many_headers(bank["port"])
        with httpx.Client(base_url=f"http://127.0.0.1:{bank['port']}", headers=AUTH, timeout=5) as client:
            for _ in range(10):  # each answered within the client's 5 s while the floods go on
                reply = client.post("/v1/score", json=bank["row"])
                assert reply.status_code == 200 and reply.json()["model"] == "bank_only", reply.text
    finally:
        stop.set()
        for t in floods:
            t.join(timeout=30)
    assert many.startswith(b"HTTP/1.1 431 "), many[:200]
    assert answers and all(a.startswith(b"HTTP/1.1 431 ") for a in answers), [a[:100] for a in answers[:5]]
    assert b'"header_too_large"' in answers[0] and b"serve.max_header_kb" in answers[0]


def test_chunked_10_mb_to_models_refused_413_having_read_about_the_cap(bank):
    cap = 512 * 1024  # serve.max_body_kb's default
    piece = b"x" * 65536
    chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
    with _connect(bank["port"]) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        sock.sendall(b"POST /v1/models HTTP/1.1\r\nHost: bank\r\nAuthorization: Bearer " + MANAGE.encode() +
                     b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        sent = 0
        try:  # up to 10 MB, until the bank answers or closes the connection
            while sent < 10 << 20 and not select.select([sock], [], [], 0)[0]:
                sock.sendall(chunk)
                sent += len(piece)
        except OSError:
            pass
        answer = _answer(sock, wait=5)
    assert answer.startswith(b"HTTP/1.1 413 ") and b'"too_large"' in answer, answer[:300]
    assert sent < 3 << 20, f"the bank took {sent} bytes of a body over its {cap}-byte cap"


def test_1200_idle_connections_leave_the_service_answering(bank):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 1500), hard), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1500:
        pytest.skip("this test process cannot open 1,200 sockets")
    idle: list[socket.socket] = []
    try:
        for _ in range(1200):
            idle.append(_connect(bank["port"]))
        began = time.monotonic()
        with httpx.Client(base_url=f"http://127.0.0.1:{bank['port']}", headers=AUTH, timeout=5) as client:
            reply = client.post("/v1/score", json=bank["row"])
            assert reply.status_code == 200, reply.text
            assert time.monotonic() - began < 5
            assert _metric(client, 'vsplit_serve_dropped_connections_total{reason="max_connections"}') >= 600
    finally:
        for sock in idle:
            sock.close()
    assert "HTTP front closed connections" in bank["log"].read_text()


def test_slow_head_answered_408_and_dropped_bodies_counted_499_not_500(bank):
    client = bank["client"]
    before = _metric(client, 'vsplit_serve_requests_total{path="/v1/score",status="499"}')
    head = (b"POST /v1/score HTTP/1.1\r\nHost: bank\r\nAuthorization: Bearer " + TOKEN.encode() +
            b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\": ")
    with _connect(bank["port"]) as gone, _connect(bank["port"]) as slow_body, _connect(bank["port"]) as slow_head:
        gone.sendall(head)
        slow_body.sendall(head)
        slow_head.sendall(b"GET /healthz HTTP/1.1\r\nHost: bank\r\n")
        time.sleep(0.2)
        gone.close()  # a client that disconnects mid-body
        began = time.monotonic()
        assert _answer(slow_body, wait=DEADLINE_S + 5) == b""  # closed at the body deadline
        assert _answer(slow_head, wait=DEADLINE_S + 5).startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - began < DEADLINE_S + 2
    deadline = time.monotonic() + 5
    while _metric(client, 'vsplit_serve_requests_total{path="/v1/score",status="499"}') < before + 2:
        assert time.monotonic() < deadline, client.get("/metrics").text
        time.sleep(0.1)
    assert _metric(client, 'vsplit_serve_requests_total{path="/v1/score",status="500"}') == 0


def test_metrics_health_and_api_docs_need_the_token(bank):
    with httpx.Client(base_url=f"http://127.0.0.1:{bank['port']}", timeout=5) as stranger:
        for path in ("/metrics", "/healthz", "/docs", "/redoc", "/openapi.json", "/v1/models"):
            reply = stranger.get(path)
            assert reply.status_code == 401 and reply.json()["error"]["code"] == "unauthorized", (path, reply.text)
            assert stranger.get(path, headers=AUTH).status_code in (200, 503), path
        # model management takes its own token only: the scoring token is refused
        reply = stranger.post("/v1/models", json={"run_id": "v1"}, headers=AUTH)
        assert reply.status_code == 401 and "serve.manage_token_file" in reply.json()["error"]["message"]
        reply = stranger.post("/v1/models", json={"run_id": "v1"}, headers=MANAGER)  # passes; no partner here
        assert reply.status_code == 503 and reply.json()["error"]["code"] == "partner_down", reply.text


@pytest.fixture(scope="module")
def service(root):
    from vsplit.serve.service import BankService

    overrides = [f"serve.address=127.0.0.1:{free_port()}", "serve.manage=true", 'serve.manage_token_file="manage.txt"',
                 'serve.token_file="token.txt"']
    service = BankService(load_config(root / "bank" / "party.toml", overrides=overrides))
    yield service
    service.close()


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_model_management_off_by_default_and_no_run_read_before_it_is_checked(root, service, monkeypatch):
    import dataclasses

    from fastapi.testclient import TestClient

    import vsplit.node.aligned as aligned
    from vsplit.serve.http import make_app

    default = dataclasses.replace(service.config, serve=dataclasses.replace(service.config.serve, manage=False))
    monkeypatch.setattr(service, "config", default)
    off = TestClient(make_app(service, token=TOKEN)).post("/v1/models", json={"run_id": "v1"}, headers=AUTH)
    assert off.status_code == 403 and off.json()["error"]["code"] == "management_off", off.text
    monkeypatch.undo()

    reads: list[object] = []
    monkeypatch.setattr(aligned, "read_table", lambda *a, **k: reads.append(a) or pytest.fail("table read"))
    monkeypatch.setattr(aligned, "open_table", lambda *a, **k: reads.append(a) or pytest.fail("table read"))
    runs = root / "runs"
    (runs / "empty" / "bank").mkdir(parents=True)  # a run folder without a model
    (runs / "borrowed" / "bank").mkdir(parents=True)  # another party's model under this party's name
    shutil.copy(runs / "v1" / "shop" / "model.npz", runs / "borrowed" / "bank" / "model.npz")
    client = TestClient(make_app(service, token=TOKEN, manage_token=MANAGE))
    answers = []
    for run_id in ("v9", "empty", "borrowed", "../v1", "v1/../../etc"):
        reply = client.post("/v1/models", json={"run_id": run_id}, headers=MANAGER)
        assert reply.status_code == 422 and reply.json()["error"]["field"] == "run_id", reply.text
        answers.append(reply.text)
    assert reads == []
    assert all(str(root) not in text and "/tmp" not in text and "runs/" not in text for text in answers), answers


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_public_health_lets_only_healthz_answer_without_the_token(service, monkeypatch):
    import dataclasses

    from fastapi.testclient import TestClient

    from vsplit.serve.http import make_app

    public = dataclasses.replace(service.config, serve=dataclasses.replace(service.config.serve, public_health=True))
    monkeypatch.setattr(service, "config", public)
    client = TestClient(make_app(service, token=TOKEN, manage_token=MANAGE))
    assert client.get("/healthz").status_code == 503  # answered (no partner here), without the token
    for path in ("/metrics", "/docs", "/openapi.json", "/v1/models"):
        assert client.get(path).status_code == 401, path


def test_token_files_readable_by_others_and_management_without_its_own_token_refused(root):
    from vsplit.serve.run import bearer_token, manage_token

    config = root / "bank" / "party.toml"
    loose = root / "bank" / "loose.txt"
    loose.write_text(TOKEN + "\n")
    loose.chmod(0o644)
    with pytest.raises(ConfigError, match=r"serve.token_file: .* readable by other users .*chmod 600"):
        bearer_token(load_config(config, overrides=['serve.token_file="loose.txt"']))
    with pytest.raises(ConfigError, match=r"serve\.manage: model management needs a credential of its own"):
        load_config(config, overrides=["serve.manage=true"])
    same = _secret(root / "bank" / "same.txt", TOKEN)
    with pytest.raises(ConfigError, match=r"serve\.manage_token_file: holds the same token as serve\.token_file"):
        manage_token(load_config(config, overrides=['serve.token_file="token.txt"', "serve.manage=true",
                                                    f'serve.manage_token_file="{same.name}"']))


def test_heads_in_one_byte_pieces_and_pipelined_requests_are_answered_like_whole_ones():
    """The front gathers heads itself: a head sent a byte at a time, split across its blank line, or pipelined
    behind another request in one send is parsed as a whole one is (a plain ASGI app answers its path)."""
    import uvicorn

    from vsplit.serve.front import Connections, Limits, front_protocol

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        text = scope["path"].encode() + b":" + body
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(text))]})
        await send({"type": "http.response.body", "body": text})

    limits = Limits(max_head=1024, max_headers=10, header_timeout_s=5, body_timeout_s=5, max_connections=16)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                          http=front_protocol(limits, Connections(limits))))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        one = b"POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
        with _connect(port) as sock:  # a byte at a time
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(len(one)):
                sock.sendall(one[i:i + 1])
                time.sleep(0.001)
            assert sock.recv(4096).endswith(b"/one:abc")
        with _connect(port) as sock:  # two requests in one send, then a third split inside its blank line
            two = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r"
            sock.sendall(two)
            time.sleep(0.1)
            sock.sendall(b"\n")
            got = b""
            while got.count(b"HTTP/1.1 200") < 2:
                got += sock.recv(4096)
            assert got.index(b"/a:") < got.index(b"/b:")
        with _connect(port) as sock:  # 11 headers: over this front's 10
            sock.sendall(b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(11)) + b"\r\n")
            assert _answer(sock, wait=5).startswith(b"HTTP/1.1 431 ")
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_scoring_error_answers_its_type_and_keeps_its_text_for_the_log(caplog):
    import asyncio
    from types import SimpleNamespace

    from vsplit.errors import ConfigError
    from vsplit.serve.http import Scoring

    async def failing(rows):
        raise ConfigError("cannot read /srv/bank/runs/v7/bank/model.npz (a secret path)")

    service = SimpleNamespace(scorer=SimpleNamespace(model=SimpleNamespace(columns={"age": "numeric"}, nulls=False)),
                              config=SimpleNamespace(data=SimpleNamespace(missing="error")), max_batch=8,
                              metrics=SimpleNamespace(count=lambda *a, **k: None), submit=failing)
    scoring = Scoring(service, max_bytes=4096, wait_s=1.0)
    status, body, _, _ = asyncio.run(scoring.answer("/v1/score", b'{"id": "c1", "features": {"age": 40}}'))
    assert status == 500 and b"scoring_failed" in body and b"ConfigError" in body
    assert b"/srv" not in body and "/srv/bank/runs/v7" in caplog.text
