"""The bank's HTTP API (FastAPI on uvicorn): ``POST /v1/score``, ``POST /v1/score:batch``, ``GET /healthz``,
``GET /v1/models`` (and ``POST /v1/models`` to load and switch a version), ``GET /metrics``; OpenAPI at ``/docs``.

Errors are JSON, ``{"error": {"code": ..., "field": ..., "message": ...}}``: 400 malformed JSON, 401 a missing or
wrong bearer token, 403 model management off, 413 a body over ``serve.max_body_kb``, 422 a field of the wrong type or
an unknown column, 503 a partner down (``"party"`` names it) or the queue full. A scoring request may ask for
reason codes (``"reasons": k``, :mod:`vsplit.serve.reasons`; 409 in cached mode). With a token set, every path needs
it (``/healthz`` not, with ``serve.public_health``); ``POST /v1/models`` needs the management token instead
(``serve.manage``). Every body is read here, stopping at ``serve.max_body_kb``; the limits on heads, deadlines and
connections are the front's (:mod:`vsplit.serve.front`). Access logs are one JSON line per request (method, path,
status, milliseconds, rows), never an ID or a feature value; a client gone before its answer counts as status 499.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from vsplit.errors import ConfigError, VsplitError
from vsplit.serve.links import PartnerDown
from vsplit.serve.reasons import ReasonsRefused, check_reasons, parse_reasons, reasons_for, without_reasons
from vsplit.serve.requests import BadRequest, dumps, parse_body, parse_row, parse_rows
from vsplit.serve.runs import run_problem
from vsplit.serve.service import BankService, Overloaded

access = logging.getLogger("vsplit.serve.access")

#: the scoring paths, answered by :class:`Scoring` without FastAPI's per-request machinery
SCORING = ("/v1/score", "/v1/score:batch")

_ROW = {"type": "object", "required": ["id", "features"],
        "properties": {"id": {"type": "string", "example": "c-000042"},
                       "features": {"type": "object", "additionalProperties": True,
                                    "description": "the bank's own columns of the model, by name"}}}
_SCORED = {"type": "object", "properties": {
    "id": {"type": "string"}, "score": {"type": "number", "nullable": True},
    "model": {"type": "string", "enum": ["split", "bank_only"], "nullable": True},
    "fallback": {"type": "boolean"}, "version": {"type": "string"},
    "points": {"type": "number", "description": "a scorecard's score in points (score is then its probability)"},
    "unknown_to": {"type": "array", "items": {"type": "string"}},
    "warnings": {"type": "array", "description": "e.g. code unseen_category: the field's category was never seen "
                 "in training (scored as the unknown category)",
                 "items": {"type": "object", "properties": {"code": {"type": "string"}, "field": {"type": "string"},
                                                           "message": {"type": "string"}}}},
    "reasons": {"type": "array", "description": "only when the request asks (\"reasons\": k): at most k reason codes, "
                "the largest push towards a decline first, as vsplit explain writes them (docs/serving.md)",
                "items": {"type": "object", "properties": {"code": {"type": "string"}, "text": {"type": "string"},
                                                           "contribution": {"type": "number"}}}},
    "declined": {"type": "boolean", "description": "with reasons: declined at explain.threshold, as vsplit explain "
                 "decides"}}}
#: the optional "reasons" field of a scoring request (:mod:`vsplit.serve.reasons`)
_REASONS = {"type": "integer", "minimum": 1, "maximum": 10,
            "description": "ask for this many reason codes per applicant (live mode; absent: none, the fast path)"}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def make_app(service: BankService, *, token: str | None = None, manage_token: str | None = None) -> Observe:
    """The API of ``service`` as an ASGI app; ``token``: the bearer token every call must carry (``None``: none);
    ``manage_token``: the one ``POST /v1/models`` must carry (required when ``serve.manage`` is on). :class:`Observe`
    wraps the FastAPI app (its ``.app``) from the outside, so the scoring path skips FastAPI's middleware stack."""
    config = service.config
    if config.serve.manage and manage_token is None:
        raise ConfigError("serve.manage: model management needs a credential of its own; set "
                          "serve.manage_token_file")
    max_bytes = config.serve.max_body_kb * 1024
    wait_s = 2 * config.serve.timeout_ms / 1000 + 5.0

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        await service.drain()  # uvicorn has stopped taking requests and finished those it had; now the queue
        await asyncio.to_thread(service.close)

    app = FastAPI(title="vsplit scoring", version="1", lifespan=lifespan,
                  description="Online joint scoring of a vertical split model: the bank's columns here, the "
                              "partners' embeddings over mutual TLS (docs/serving.md).")

    def error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
        headers = {"Retry-After": "1"} if status == 503 else None
        return JSONResponse({"error": {"code": code, "message": message, **extra}}, status_code=status,
                            headers=headers)

    async def read(request: Request) -> Any:
        raw = await request.body()
        return parse_body(raw, max_bytes=max_bytes)

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest) -> JSONResponse:
        service.metrics.count("vsplit_serve_rejected_total", reason=exc.code)
        return JSONResponse(exc.as_dict(), status_code=exc.status)

    @app.exception_handler(VsplitError)
    async def vsplit_error(request: Request, exc: VsplitError) -> JSONResponse:
        logging.getLogger(__name__).error("%s %s failed: %s: %s", request.method, request.url.path,
                                          type(exc).__name__, exc)
        return error(500, "scoring_failed", f"{type(exc).__name__} (see the service's log)")

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        logging.getLogger(__name__).error("%s %s failed: %s", request.method, request.url.path, type(exc).__name__)
        return error(500, "internal", "internal error (see the service's log)")

    # POST /v1/score and /v1/score:batch are answered by the lean path in :class:`Observe` (:class:`Scoring`); these
    # routes describe them in the OpenAPI document and answer the same way if the app is mounted without Observe
    scoring = Scoring(service, max_bytes=max_bytes, wait_s=wait_s)

    @app.post("/v1/score", summary="Score one applicant",
              openapi_extra=_body({**_ROW, "properties": {**_ROW["properties"], "reasons": _REASONS}}),
              responses={200: {"content": {"application/json": {"schema": _SCORED}}}})
    async def score(request: Request) -> Response:
        status, body, headers, rows = await scoring.answer(request.url.path, await request.body())
        request.state.rows = rows
        return Response(body, status_code=status, headers=dict(headers), media_type="application/json")

    @app.post("/v1/score:batch", summary="Score several applicants at once",
              openapi_extra=_body({"type": "object", "properties": {"rows": {"type": "array", "items": _ROW},
                                                                    "reasons": _REASONS}}))
    async def score_batch(request: Request) -> Response:
        return await score(request)

    @app.get("/healthz", summary="Liveness and the partners' state (503 when one is down)")
    async def healthz() -> JSONResponse:
        status = service.status()
        return JSONResponse(status, status_code=200 if status["status"] == "ok" else 503)

    @app.get("/v1/models", summary="The loaded model versions and which one is active")
    async def models() -> JSONResponse:
        return JSONResponse({"models": service.scorer.describe()})

    @app.post("/v1/models", summary="Load a trained run (by its ID) beside the others, and switch to it",
              openapi_extra=_body({"type": "object", "required": ["run_id"],
                                   "properties": {"run_id": {"type": "string"}, "activate": {"type": "boolean"}}}))
    async def load_model(request: Request) -> JSONResponse:
        body = await read(request)
        if not isinstance(body, dict) or not isinstance(body.get("run_id"), str) or not body["run_id"]:
            raise BadRequest("run_id", "expected {\"run_id\": \"<a trained run's ID>\", \"activate\": true}")
        activate = body.get("activate", True)
        if not isinstance(activate, bool):
            raise BadRequest("activate", "expected true or false")
        run_id = body["run_id"]
        if run_id not in service.scorer.versions:  # checked from the run folder alone, before any data is read
            problem = run_problem(config, run_id)
            if problem is not None:
                return error(422, "model_unknown", problem, field="run_id")
        try:
            await asyncio.to_thread(service.scorer.load, run_id)
        except PartnerDown as exc:
            return error(503, "partner_down", str(exc), party=exc.party)
        except VsplitError as exc:  # its text may name files: the log has it, the client gets no path
            logging.getLogger(__name__).warning("POST /v1/models: model %r not loaded: %s: %s", run_id,
                                                type(exc).__name__, exc)
            return error(422, "model_not_loaded", f"model {run_id!r} could not be loaded ({type(exc).__name__}); "
                                                  "the service's log says why", field="run_id")
        if activate:
            service.scorer.activate(body["run_id"])
        return JSONResponse({"models": service.scorer.describe()})

    @app.get("/metrics", summary="Prometheus metrics (text format)", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(service.metrics.render(), media_type="text/plain; version=0.0.4")

    return Observe(app, service=service, token=token, max_bytes=max_bytes, scoring=scoring,
                   manage_token=manage_token, public_health=config.serve.public_health)


class Scoring:
    """``POST /v1/score`` and ``/v1/score:batch`` from the request's bytes to the answer's bytes: the hot path.

    It parses and checks the body (:mod:`vsplit.serve.requests`, the same 4xx naming the field), queues the rows
    (:meth:`BankService.submit`) and encodes the answer with orjson when it is installed, with no framework object
    per request: FastAPI's routing, dependency solving and response classes cost more CPU than scoring the row."""

    def __init__(self, service: BankService, *, max_bytes: int, wait_s: float) -> None:
        self.service, self.max_bytes, self.wait_s = service, max_bytes, wait_s
        self.columns = service.scorer.model.columns  # every loaded version reads the same bank columns
        self.nulls = service.scorer.model.nulls  # trees: a missing value has a bin of its own

    async def answer(self, path: str, raw: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]], int]:
        """``(status, body, extra headers, rows scored)`` of a scoring request to ``path`` with body ``raw``."""
        k = None
        try:
            body = parse_body(raw, max_bytes=self.max_bytes)
            if isinstance(body, dict) and "reasons" in body:  # reason codes asked: the slower path
                k, body = parse_reasons(body), without_reasons(body)
            if path == "/v1/score":
                rows = [parse_row(body, columns=self.columns, nulls=self.nulls)]
            else:
                rows = parse_rows(body, columns=self.columns, nulls=self.nulls, max_rows=self.service.max_batch)
        except BadRequest as exc:
            self.service.metrics.count("vsplit_serve_rejected_total", reason=exc.code)
            return exc.status, dumps(exc.as_dict()), [], 0
        if k is not None:
            try:
                check_reasons(self.service.config, self.service.scorer.model)
            except ReasonsRefused as exc:
                self.service.metrics.count("vsplit_serve_rejected_total", reason=exc.code)
                return _refusal(exc.status, exc.code, str(exc), field="reasons")
        try:
            results = await asyncio.wait_for(self.service.submit(rows), self.wait_s)
        except Overloaded as exc:
            return _refusal(503, "overloaded", str(exc))
        except PartnerDown as exc:
            return _refusal(503, "partner_down", str(exc), party=exc.party)
        except asyncio.TimeoutError:
            return _refusal(504, "timeout", f"no answer within {self.wait_s:g} s")
        except VsplitError as exc:  # its text may name files or a partner's words: the log has it, not the client
            logging.getLogger(__name__).error("%s failed: %s: %s", path, type(exc).__name__, exc)
            return _refusal(500, "scoring_failed", f"{type(exc).__name__} (see the service's log)")
        except Exception as exc:  # a bug: logged here, the client gets no traceback
            logging.getLogger(__name__).error("%s failed: %s", path, type(exc).__name__, exc_info=exc)
            return _refusal(500, "internal", "internal error (see the service's log)")
        if k is not None:
            return await self.with_reasons(path, rows, results, k)
        if path == "/v1/score":
            return 200, dumps(results[0].as_dict()), [], 1
        return 200, dumps({"results": [r.as_dict() for r in results]}), [], len(rows)

    async def with_reasons(self, path: str, rows: list[Any], results: list[Any],
                           k: int) -> tuple[int, bytes, list[tuple[bytes, bytes]], int]:
        """The answer of scored ``rows`` with ``k`` reason codes each (:mod:`vsplit.serve.reasons`)."""
        scorer = self.service.scorer
        try:
            extra = await asyncio.to_thread(reasons_for, self.service.config, scorer.versions, scorer.links, rows,
                                            results, k)
        except PartnerDown as exc:
            return _refusal(503, "partner_down", str(exc), party=exc.party)
        except ReasonsRefused as exc:
            return _refusal(exc.status, exc.code, str(exc), party=exc.party)
        except Exception as exc:  # its text may name files: the log has it, not the client
            logging.getLogger(__name__).error("%s reasons failed: %s: %s", path, type(exc).__name__, exc,
                                              exc_info=not isinstance(exc, VsplitError))
            return _refusal(500, "reasons_failed", f"{type(exc).__name__} (see the service's log)")
        answers = [{**r.as_dict(), **more} for r, more in zip(results, extra, strict=True)]
        if path == "/v1/score":
            return 200, dumps(answers[0]), [], 1
        return 200, dumps({"results": answers}), [], len(rows)


def _refusal(status: int, code: str, message: str, **extra: Any) -> tuple[int, bytes, list[tuple[bytes, bytes]], int]:
    headers = [(b"retry-after", b"1")] if status == 503 else []
    return status, dumps({"error": {"code": code, "message": message, **extra}}), headers, 0


class Observe:
    """The outermost ASGI layer (plain, so it adds microseconds, not a task per request): the bearer token of every
    path (the management token of ``POST /v1/models``) and the declared body size, checked before the body is read;
    every body read here, stopping at ``max_bytes``; the scoring paths answered by :class:`Scoring`, everything else
    by the FastAPI app ``app`` (given the body read); then metrics and the access log of every request."""

    def __init__(self, app: Any, *, service: BankService, token: str | None, max_bytes: int,
                 scoring: Scoring | None = None, manage_token: str | None = None, public_health: bool = False) -> None:
        self.app, self.service, self.max_bytes, self.scoring = app, service, max_bytes, scoring
        self.expected = f"Bearer {token}".encode() if token is not None else None
        self.manager = f"Bearer {manage_token}".encode() if manage_token is not None else None
        self.public_health = public_health

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        refusal = self.refuse(scope)
        if refusal is not None:
            await refusal(scope, receive, sending)
        else:
            body = await self.body(receive)
            if isinstance(body, bytes):
                if self.scoring is not None and scope["method"] == "POST" and scope["path"] in SCORING:
                    await self.score(scope, body, sending)
                else:
                    await self.app(scope, _replay(body, receive), sending)
            elif body is not None:  # over the cap: answered without reading the rest, and the connection closed
                await _answer(sending, *_too_large(body, self.max_bytes)[:2], [(b"connection", b"close")])
            else:  # the client went (or the front closed it past serve.body_timeout_s) before its body was read
                status[0] = CLIENT_CLOSED
        _done(scope, status[0], started, self.service)

    async def body(self, receive: Any) -> bytes | int | None:
        """The request's body, read until its end or ``max_bytes`` (then the bytes read so far, an ``int``), or
        ``None`` if the client went."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:  # a chunked body without Content-Length: stop reading at the cap
                return size
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def score(self, scope: Any, raw: bytes, send: Any) -> None:
        """The lean path of a scoring request: :class:`Scoring` on its body."""
        assert self.scoring is not None
        status, body, headers, rows = await self.scoring.answer(scope["path"], raw)
        scope.setdefault("state", {})["rows"] = rows
        await _answer(send, status, body, headers)

    def refuse(self, scope: Any) -> Response | None:
        path = scope["path"]
        if path == "/healthz" and self.public_health:
            return None
        headers = dict(scope["headers"])
        given = headers.get(b"authorization", b"")
        managing = path == "/v1/models" and scope["method"] == "POST"
        if managing and self.manager is not None:
            if not hmac.compare_digest(given, self.manager):
                return _unauthorized("missing or wrong management token (Authorization: Bearer ..., the token of "
                                     "serve.manage_token_file)")
        elif self.expected is not None and not hmac.compare_digest(given, self.expected):
            return _unauthorized("missing or wrong bearer token (Authorization: Bearer ...)")
        elif managing:
            return JSONResponse({"error": {"code": "management_off", "message": "model management is off here "
                                           "(serve.manage = false); the operator loads and switches models with "
                                           "serve.manage and serve.manage_token_file (docs/serving.md)"}},
                                status_code=403)
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            status, body, _, _ = _too_large(int(length), self.max_bytes)  # closed: the declared body is not read
            return Response(body, status_code=status, media_type="application/json", headers={"connection": "close"})
        return None


#: the status counted for a request whose client went before its answer (nginx's convention)
CLIENT_CLOSED = 499


def _unauthorized(message: str) -> Response:
    return JSONResponse({"error": {"code": "unauthorized", "field": "Authorization", "message": message}},
                        status_code=401, headers={"WWW-Authenticate": "Bearer"})


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives ``body`` (already read) first, then what ``receive`` gives (the client's going)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()
    return replay


async def _answer(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def _too_large(size: int, max_bytes: int) -> tuple[int, bytes, list[tuple[bytes, bytes]], int]:
    refusal = BadRequest("body", f"{size} bytes is over the limit of {max_bytes} (serve.max_body_kb)", status=413,
                         code="too_large")
    return 413, dumps(refusal.as_dict()), [], 0


def _done(scope: Any, status: int, started: float, service: BankService) -> None:
    seconds = time.perf_counter() - started
    path = scope["path"]
    route = path if path in ("/v1/score", "/v1/score:batch", "/v1/models", "/healthz", "/metrics") else "other"
    if status == CLIENT_CLOSED:
        service.metrics.count("vsplit_serve_rejected_total", reason="client_closed")
    service.metrics.count("vsplit_serve_requests_total", path=route, status=str(status))
    service.metrics.observe("vsplit_serve_request_seconds", seconds, path=route)
    if access.isEnabledFor(logging.INFO):
        state = scope.get("state") or {}
        client = scope.get("client")
        access.info(json.dumps({"ts": round(time.time(), 3), "method": scope["method"], "path": route,
                                "status": status, "ms": round(seconds * 1000, 3), "rows": state.get("rows", 0),
                                "client": client[0] if client else None}))
