"""The bank's HTTP API (FastAPI on uvicorn): ``POST /v1/score``, ``POST /v1/score:batch``, ``GET /healthz``,
``GET /v1/models`` (and ``POST /v1/models`` to load and switch a version), ``GET /metrics``; OpenAPI at ``/docs``.

Errors are JSON, ``{"error": {"code": ..., "field": ..., "message": ...}}``: 400 malformed JSON, 401 a missing or
wrong bearer token, 413 a body over ``serve.max_body_kb``, 422 a field of the wrong type or an unknown column, 503 a
partner down (``"party"`` names it) or the queue full. Access logs are one JSON line per request (method, path,
status, milliseconds, rows), never an ID or a feature value.
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

from vsplit.errors import VsplitError
from vsplit.serve.links import PartnerDown
from vsplit.serve.requests import BadRequest, parse_body, parse_row, parse_rows
from vsplit.serve.service import BankService, Overloaded

access = logging.getLogger("vsplit.serve.access")

_ROW = {"type": "object", "required": ["id", "features"],
        "properties": {"id": {"type": "string", "example": "c-000042"},
                       "features": {"type": "object", "additionalProperties": True,
                                    "description": "the bank's own columns of the model, by name"}}}
_SCORED = {"type": "object", "properties": {
    "id": {"type": "string"}, "score": {"type": "number", "nullable": True},
    "model": {"type": "string", "enum": ["split", "bank_only"], "nullable": True},
    "fallback": {"type": "boolean"}, "version": {"type": "string"},
    "unknown_to": {"type": "array", "items": {"type": "string"}}}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def make_app(service: BankService, *, token: str | None = None) -> FastAPI:
    """The API of ``service``; ``token``: the bearer token every ``/v1`` call must carry (``None``: none)."""
    config = service.config
    max_bytes = config.serve.max_body_kb * 1024
    nulls = config.data.missing != "error"
    wait_s = 2 * config.serve.timeout_ms / 1000 + 5.0

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        await asyncio.to_thread(service.close)  # uvicorn has drained the in-flight requests; now the queue

    app = FastAPI(title="vsplit scoring", version="1", lifespan=lifespan,
                  description="Online joint scoring of a vertical split model: the bank's columns here, the "
                              "partners' embeddings over mutual TLS (docs/serving.md).")

    def error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
        headers = {"Retry-After": "1"} if status == 503 else None
        return JSONResponse({"error": {"code": code, "message": message, **extra}}, status_code=status,
                            headers=headers)

    async def scored(rows: list[Any]) -> list[Any]:
        try:
            future = service.submit(rows)
        except Overloaded as exc:
            raise _Http(error(503, "overloaded", str(exc))) from None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), wait_s)
        except PartnerDown as exc:
            raise _Http(error(503, "partner_down", str(exc), party=exc.party)) from None
        except asyncio.TimeoutError:
            raise _Http(error(504, "timeout", f"no answer within {wait_s:g} s")) from None

    async def read(request: Request) -> Any:
        raw = await request.body()
        return parse_body(raw, max_bytes=max_bytes)

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest) -> JSONResponse:
        service.metrics.count("vsplit_serve_rejected_total", reason=exc.code)
        return JSONResponse(exc.as_dict(), status_code=exc.status)

    @app.exception_handler(VsplitError)
    async def vsplit_error(request: Request, exc: VsplitError) -> JSONResponse:
        return error(500, "scoring_failed", f"{type(exc).__name__}: {exc}")

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        logging.getLogger(__name__).error("%s %s failed: %s", request.method, request.url.path, type(exc).__name__)
        return error(500, "internal", "internal error (see the service's log)")

    @app.exception_handler(_Http)
    async def http_error(request: Request, exc: _Http) -> Response:
        return exc.response

    @app.post("/v1/score", summary="Score one applicant", openapi_extra=_body(_ROW),
              responses={200: {"content": {"application/json": {"schema": _SCORED}}}})
    async def score(request: Request) -> JSONResponse:
        row = parse_row(await read(request), columns=service.scorer.model.columns, nulls=nulls)
        (result,) = await scored([row])
        request.state.rows = 1
        return JSONResponse(result.as_dict())

    @app.post("/v1/score:batch", summary="Score several applicants at once",
              openapi_extra=_body({"type": "object", "properties": {"rows": {"type": "array", "items": _ROW}}}))
    async def score_batch(request: Request) -> JSONResponse:
        rows = parse_rows(await read(request), columns=service.scorer.model.columns, nulls=nulls,
                          max_rows=service.max_batch)
        results = await scored(rows)
        request.state.rows = len(rows)
        return JSONResponse({"results": [r.as_dict() for r in results]})

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
        try:
            await asyncio.to_thread(service.scorer.load, body["run_id"])
        except PartnerDown as exc:
            return error(503, "partner_down", str(exc), party=exc.party)
        except VsplitError as exc:
            return error(422, "model_not_loaded", str(exc), field="run_id")
        if activate:
            service.scorer.activate(body["run_id"])
        return JSONResponse({"models": service.scorer.describe()})

    @app.get("/metrics", summary="Prometheus metrics (text format)", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(service.metrics.render(), media_type="text/plain; version=0.0.4")

    app.add_middleware(Observe, service=service, token=token, max_bytes=max_bytes)
    return app


class Observe:
    """ASGI middleware (plain, so it adds microseconds, not a task per request): the bearer token and the body size
    of ``/v1`` calls, checked before the body is read; then metrics and the access log of every request."""

    def __init__(self, app: Any, *, service: BankService, token: str | None, max_bytes: int) -> None:
        self.app, self.service, self.max_bytes = app, service, max_bytes
        self.expected = f"Bearer {token}".encode() if token is not None else None

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
            await self.app(scope, receive, sending)
        _done(scope, status[0], started, self.service)

    def refuse(self, scope: Any) -> Response | None:
        if not scope["path"].startswith("/v1/"):
            return None
        headers = dict(scope["headers"])
        if self.expected is not None and not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
            return JSONResponse({"error": {"code": "unauthorized", "field": "Authorization",
                                           "message": "missing or wrong bearer token (Authorization: Bearer ...)"}},
                                status_code=401, headers={"WWW-Authenticate": "Bearer"})
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            return JSONResponse(BadRequest("body", f"{int(length)} bytes is over the limit of {self.max_bytes} "
                                           "(serve.max_body_kb)", status=413, code="too_large").as_dict(),
                                status_code=413)
        return None


class _Http(Exception):
    """A ready error response raised from inside a handler."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _done(scope: Any, status: int, started: float, service: BankService) -> None:
    seconds = time.perf_counter() - started
    path = scope["path"]
    route = path if path in ("/v1/score", "/v1/score:batch", "/v1/models", "/healthz", "/metrics") else "other"
    service.metrics.count("vsplit_serve_requests_total", path=route, status=str(status))
    service.metrics.observe("vsplit_serve_request_seconds", seconds, path=route)
    if access.isEnabledFor(logging.INFO):
        state = scope.get("state") or {}
        client = scope.get("client")
        access.info(json.dumps({"ts": round(time.time(), 3), "method": scope["method"], "path": route,
                                "status": status, "ms": round(seconds * 1000, 3), "rows": state.get("rows", 0),
                                "client": client[0] if client else None}))
