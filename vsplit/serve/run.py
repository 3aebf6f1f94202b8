"""Run ``vsplit serve``: the bank's HTTP service (label party) or a partner's scoring daemon (feature party).

The bank listens for its partners' daemons over mutual TLS, then serves HTTP on ``serve.http`` until SIGTERM or
Ctrl-C; it then stops accepting connections, drains the requests in flight (``serve.drain_s``) and closes the
links. A partner daemon dials the bank and serves it until stopped.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

from vsplit.atomic import refuse_shared
from vsplit.config import PartyConfig, resolve
from vsplit.errors import ConfigError

log = logging.getLogger(__name__)


def serve(config: PartyConfig, *, run_id: str | None = None, ready: Any = None, console: Any = None) -> int:
    """Serve ``config``'s party until stopped; ``ready(info)`` is called once it serves (tests, benchmarks);
    ``console``: a :class:`~vsplit.console.state.ConsoleState` that watches the service."""
    if config.party.role == "label":
        return serve_bank(config, run_id=run_id, ready=ready, console=console)
    if config.party.role == "feature":
        return serve_partner(config, run_id=run_id, ready=ready, console=console)
    raise ConfigError(f"party.role: vsplit serve runs at the label party (the HTTP API) or a feature party (its "
                      f"daemon), not {config.party.role!r}")


#: a token file holds one line; anything far longer is not one
MAX_TOKEN_FILE = 4096


def bearer_token(config: PartyConfig) -> str | None:
    """The bearer token of ``serve.token_file`` (its first line that is not blank), or ``None``."""
    return read_token(config, "token_file")


def manage_token(config: PartyConfig) -> str | None:
    """The bearer token of ``serve.manage_token_file`` when model management is on (``serve.manage``), else ``None``;
    it must differ from the scoring token."""
    if not config.serve.manage:
        return None
    token = read_token(config, "manage_token_file")
    if token is None:
        raise ConfigError("serve.manage: model management needs a credential of its own; set "
                          "serve.manage_token_file to a file holding a long random token, readable by you only")
    if token == bearer_token(config):
        raise ConfigError("serve.manage_token_file: holds the same token as serve.token_file; an app allowed to "
                          "score must not be able to switch models, so give management a token of its own")
    return token


def read_token(config: PartyConfig, key: str, *, section: str = "serve") -> str | None:
    """The bearer token of the file ``<section>.<key>`` (``serve.token_file``; ``console.token_file``: its first line
    that is not blank), or ``None`` if unset; the file must be readable by its owner only, like a private key."""
    name = getattr(getattr(config, section), key)
    if not name:
        return None
    path = resolve(config, name)
    try:
        refuse_shared(path, path.stat().st_mode, what=f"{section}.{key}:",
                      why="a token is a secret like a private key")
        if path.stat().st_size > MAX_TOKEN_FILE:
            raise ConfigError(f"{section}.{key}: {path} holds {path.stat().st_size} bytes; a token file holds one "
                              "line, the token")
        lines = path.read_bytes().decode("utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{section}.{key}: cannot read {path} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{section}.{key}: {path} is not UTF-8 text; write the token as one line of "
                          "printable ASCII") from None
    token = next((line.strip() for line in lines if line.strip()), "")
    if not all(33 <= ord(c) < 127 for c in token):
        raise ConfigError(f"{section}.{key}: the token in {path} holds a space, a control or a non-ASCII "
                          "character, which an HTTP Authorization header cannot carry; use printable ASCII, e.g. "
                          "`python -c \"import secrets; print(secrets.token_urlsafe(32))\"`")
    if len(token) < 16:
        raise ConfigError(f"{section}.{key}: the token in {path} is shorter than 16 characters; use a long random "
                          "one, e.g. `python -c \"import secrets; print(secrets.token_urlsafe(32))\"`")
    return token


def raise_open_files(want: int) -> int:
    """Raise this process's soft limit of open files towards its hard limit (at least ``want`` if allowed); the
    soft limit now. A default 1,024 is below what a busy front with its partners' links and files needs."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return want
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, want, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def serve_bank(config: PartyConfig, *, run_id: str | None = None, ready: Any = None, console: Any = None) -> int:
    import uvicorn

    from vsplit.node.links import parse_address
    from vsplit.serve.front import Connections, Limits, front_protocol
    from vsplit.serve.http import make_app
    from vsplit.serve.service import BankService

    s = config.serve
    host, port = parse_address(s.http, key="serve.http")
    token, manager = bearer_token(config), manage_token(config)
    tls: dict[str, Any] = {}
    if s.http_cert or s.http_key:
        if not (s.http_cert and s.http_key):
            raise ConfigError("serve.http_cert and serve.http_key: HTTPS needs both")
        import ssl

        tls = {"ssl_certfile": str(resolve(config, s.http_cert)), "ssl_keyfile": str(resolve(config, s.http_key))}
        if s.http_client_ca:
            tls.update(ssl_ca_certs=str(resolve(config, s.http_client_ca)), ssl_cert_reqs=ssl.CERT_REQUIRED)
    elif s.http_client_ca:
        raise ConfigError("serve.http_client_ca: client certificates need HTTPS; set serve.http_cert and http_key")
    service = BankService(config, run_id=run_id)
    address = service.listen()
    service.start()
    if console is not None:  # it reads the service's status and metrics when asked
        console.watch_service(service)
    app = make_app(service, token=token, manage_token=manager)
    limits = Limits.of(s)
    files = raise_open_files(limits.max_connections + 256)
    if files < limits.max_connections + 64:
        log.warning("serve.max_connections = %d is near this process's open-files limit (%d); raise it (ulimit -n) "
                    "or lower serve.max_connections", limits.max_connections, files)
    front = front_protocol(limits, Connections(limits, metrics=service.metrics))
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                                           http=front, timeout_graceful_shutdown=int(max(1, s.drain_s)),
                                           lifespan="on", **tls))
    log.info("%s: partners connect to %s:%d; HTTP on %s", config.party.name, *address, s.http)
    print(f"vsplit serve: {config.party.name} scores model {service.scorer.active} ({s.mode} mode) on "
          f"{'https' if tls else 'http'}://{s.http}; partners connect to {address[0]}:{address[1]}", flush=True)
    if ready is not None:
        threading.Thread(target=_when_started, args=(server, ready, {"http": s.http, "links": address,
                                                                     "server": server}), daemon=True).start()
    if threading.current_thread() is threading.main_thread():
        # uvicorn drains on SIGTERM / Ctrl-C, then raises the signal again for the handler it found: a graceful
        # stop is a normal end here (exit 0), not a death by signal
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: None)
    server.run()
    print(f"vsplit serve: {config.party.name} stopped", file=sys.stderr, flush=True)
    return 0


def _when_started(server: Any, ready: Any, info: dict[str, Any]) -> None:
    import time

    while not server.started and not server.should_exit:
        time.sleep(0.01)
    ready(info)


def serve_partner(config: PartyConfig, *, run_id: str | None = None, ready: Any = None, console: Any = None) -> int:
    from vsplit.serve.partner import PartnerDaemon

    daemon = PartnerDaemon(config, run_id=run_id)
    if console is not None:
        console.watch_service(daemon)

    def stop(signum: int, frame: Any) -> None:
        daemon.close()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    print(f"vsplit serve: {config.party.name} serves model {daemon.default} to {daemon.bank} "
          f"({len(daemon.tables[daemon.default])} customers)", flush=True)
    if ready is not None:
        ready({"party": config.party.name})
    try:
        daemon.run()
    except KeyboardInterrupt:
        daemon.close()
    print(f"vsplit serve: {config.party.name} stopped", file=sys.stderr, flush=True)
    return 0
