"""The console's HTTP server: one page, its static files, and read-only JSON of what the party knows.

Theory of operation. :func:`start_console` runs uvicorn in a daemon thread of the party's own process, with the
serving front's hardened protocol (:mod:`vsplit.serve.front`: a cap on the request head and on open connections,
deadlines for heads and bodies). The app answers ``GET`` (and ``HEAD``) only: anything else is 405, so there is no
write action of any kind. Routes: ``/`` (the page), ``/static/<file>`` (the page's script, its style, uPlot),
``/api/views`` (what can be shown: the live run, or each finished party folder), ``/api/state?view=...`` (one
snapshot, polled by the page every second while live) and ``/files/<view>/<name>`` (a finished party's report,
model card, value report and pictures, by name only, :data:`vsplit.console.finished.SHOWN`;
a Markdown file as plain text).

Bound to 127.0.0.1 unless ``console.host`` says otherwise; any other address needs ``console.token_file``
(:func:`vsplit.serve.run.read_token`: a file only its owner reads). With a token every request must carry it, as
``Authorization: Bearer <token>`` or the ``vsplit_console`` cookie the page gets from a first visit to
``/?token=<token>`` (HttpOnly, SameSite=Strict). Every answer forbids framing and sniffing and allows scripts from
the console itself only (no CDN: everything is in the package).

Example:
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from vsplit.console.finished import SHOWN, find_runs, finished_snapshot, outputs
from vsplit.errors import ConfigError

log = logging.getLogger(__name__)

#: the files of static/ the page loads, and their types
STATIC = {"index.html": "text/html; charset=utf-8", "console.js": "text/javascript; charset=utf-8",
          "console.css": "text/css; charset=utf-8", "uPlot.iife.min.js": "text/javascript; charset=utf-8",
          "uPlot.min.css": "text/css; charset=utf-8", "LICENSE-uPlot.txt": "text/plain; charset=utf-8"}
COOKIE = "vsplit_console"
HEADERS = {"x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
           "cache-control": "no-store",
           "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                                      "frame-ancestors 'none'; form-action 'none'; base-uri 'none'"}
#: the sampler reads the live state this often (connection states, the loss since the last sample)
SAMPLE_S = 0.5


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ConsoleSettings:
    """Where the console listens and the token it asks for (None: loopback only)."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None

    def __post_init__(self) -> None:
        if self.token is None and not is_loopback(self.host):
            raise ConfigError(f"console.host: {self.host!r} is reachable from other machines; set console.token_file "
                              "to a file holding a long random token (readable by you only), or keep the default "
                              "host 127.0.0.1")

    @classmethod
    def of(cls, config: Any, *, port: int | None = None) -> ConsoleSettings:
        """The ``[console]`` section of a party config (``port``: instead of ``console.port``)."""
        from vsplit.serve.run import read_token

        c = config.console
        return cls(host=c.host, port=c.port if port is None else port,
                   token=read_token(config, "token_file", section="console"))


class Views:
    """What the console can show: one live :class:`~vsplit.console.state.ConsoleState` (``live``) or the finished
    party folders under ``runs``."""

    def __init__(self, *, live: Any = None, runs: Path | None = None) -> None:
        self.live, self.runs = live, runs

    def names(self) -> list[str]:
        if self.live is not None:
            return ["live"]
        return list(find_runs(self.runs)) if self.runs is not None else []

    def folder(self, view: str) -> Path | None:
        if self.live is not None:
            return self.live.folder if view == "live" else None
        return find_runs(self.runs).get(view) if self.runs is not None else None

    def snapshot(self, view: str) -> dict[str, Any] | None:
        folder = self.folder(view)
        if self.live is not None:
            snap = self.live.snapshot() if view == "live" else None
        else:
            snap = finished_snapshot(folder) if folder is not None else None
        if snap is not None:
            snap["view"] = view
            snap["outputs"] = outputs(folder)
        return snap


def make_app(views: Views, *, token: str | None = None) -> Callable[..., Any]:
    """The console's ASGI app over ``views`` (see the module docstring)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, RedirectResponse, Response

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    static = resources.files("vsplit.console") / "static"

    def refused(status: int, code: str, message: str) -> Response:
        return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=HEADERS)

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Any:
        if request.method not in ("GET", "HEAD"):
            return refused(405, "read_only", "the console is read-only: it answers GET only")
        if token is not None:
            given = request.query_params.get("token") if request.url.path == "/" else None
            if given is not None and hmac.compare_digest(given.encode(), token.encode()):
                answer = RedirectResponse("/", status_code=303, headers=HEADERS)
                answer.set_cookie(COOKIE, token, httponly=True, samesite="strict")
                return answer
            bearer = request.headers.get("authorization", "")
            cookie = request.cookies.get(COOKIE, "")
            if not (hmac.compare_digest(bearer.encode(), f"Bearer {token}".encode())
                    or hmac.compare_digest(cookie.encode(), token.encode())):
                return refused(401, "unauthorized", "missing or wrong console token: open /?token=<the token of "
                                                    "console.token_file> or send Authorization: Bearer <token>")
        response = await call_next(request)
        response.headers.update(HEADERS)
        return response

    @app.get("/")
    def page() -> Response:
        return Response((static / "index.html").read_bytes(), media_type=STATIC["index.html"])

    @app.get("/static/{name}")
    def static_file(name: str) -> Response:
        if name not in STATIC:
            return refused(404, "not_found", "no such file")
        return Response((static / name).read_bytes(), media_type=STATIC[name],
                        headers={"cache-control": "max-age=3600"})

    @app.get("/api/views")
    def list_views() -> Response:
        return JSONResponse({"views": views.names()})

    @app.get("/api/state")
    def state(view: str = "") -> Response:
        names = views.names()
        snap = views.snapshot(view or (names[0] if names else ""))
        if snap is None:
            return refused(404, "no_view", f"no view {view!r}; GET /api/views lists them")
        return Response(json.dumps(finite(snap), default=str, allow_nan=False).encode(),
                        media_type="application/json")

    @app.get("/files/{view:path}/{name}")
    def party_file(view: str, name: str) -> Response:
        folder = views.folder(view)
        path = folder / name if folder is not None and SHOWN.fullmatch(name) else None
        if path is None or not path.is_file() or path.resolve().parent != folder.resolve():
            return refused(404, "not_found", "no such file")
        kind = {"png": "image/png", "md": "text/plain; charset=utf-8"}.get(name.rsplit(".", 1)[1],
                                                                          "text/html; charset=utf-8")
        return Response(path.read_bytes(), media_type=kind)

    return app


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float as None (JSON has neither).

    >>> finite({"loss": [1.0, float("nan")], "n": 2})
    {'loss': [1.0, None], 'n': 2}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


class ConsoleServer:
    """A running console (:func:`start_console`): its ``url``; :meth:`close` stops it."""

    def __init__(self, server: Any, thread: threading.Thread, *, host: str, views: Views) -> None:
        self.server, self.thread, self.host, self.views = server, thread, host, views
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        if views.live is not None:
            self._sampler = threading.Thread(target=self._sample, name="vsplit-console-sampler", daemon=True)
            self._sampler.start()

    @property
    def port(self) -> int:
        return self.server.servers[0].sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self.views.live.sample()
            except Exception:  # the watched objects change under it at the end of a run: try again next tick
                log.debug("console sample failed", exc_info=True)

    def close(self) -> None:
        self._stop.set()
        self.server.should_exit = True
        self.thread.join(timeout=5)


def start_console(views: Views, settings: ConsoleSettings, *, deadline_s: float = 10.0) -> ConsoleServer:
    """Serve ``views`` as ``settings`` say, in a daemon thread of this process; returns once it listens."""
    import uvicorn

    from vsplit.serve.front import Connections, Limits, front_protocol

    limits = Limits(max_head=16 * 1024, max_headers=100, header_timeout_s=10.0, body_timeout_s=10.0,
                    max_connections=64)
    front = front_protocol(limits, Connections(limits))
    server = uvicorn.Server(uvicorn.Config(make_app(views, token=settings.token), host=settings.host,
                                           port=settings.port, log_level="warning", access_log=False, http=front,
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, name="vsplit-console", daemon=True)
    thread.start()
    deadline = time.monotonic() + deadline_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise ConfigError(f"console.port: the console could not listen on {settings.host}:{settings.port} "
                              "(in use?); set console.port to a free port, or 0 for any")
        time.sleep(0.01)
    return ConsoleServer(server, thread, host=settings.host, views=views)


def announce(console: ConsoleServer, who: str, *, token: bool) -> str:
    """The line a party prints so its operator can open the console."""
    how = " (add ?token=<console.token_file's token> once)" if token else ""
    return f"vsplit console: {who} on {console.url}{how}"


def live_views(state: Any) -> Views:
    """The views of one live state."""
    return Views(live=state)


def finished_views(runs: Path) -> Views:
    """The views of the finished party folders under ``runs``."""
    if not runs.is_dir():
        raise ConfigError(f"--runs: {runs} is not a folder; give the runs folder (output.dir) or one run's folder")
    return Views(runs=runs)


__all__ = ["ConsoleServer", "ConsoleSettings", "Views", "announce", "finished_views", "live_views", "make_app",
           "start_console"]
