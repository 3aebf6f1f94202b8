"""Run a horizontal schedule with every party in this one process, or every party as its own forked OS process.

Theory of operation. :func:`train_horizontal` runs every party's session (:mod:`vsplit.horizontal.session`) in this
process over memory channels and the real codec. :func:`train_horizontal_processes` takes the same arguments, gives
every party a fresh identity and a port, and forks one child process per party (POSIX): each child opens its
mutual-TLS channels (the server and a federated server listen, each client dials them), runs the same session over
one pump that holds each peer's frames for their stage, and writes what it ends with (its segments' tensors, the
bytes it sent) to a file of numpy arrays (``allow_pickle=False``) that the parent reads back. Nothing but TLS frames
passes between the parties while they train, so timings and bytes are those of separate processes. Each child
computes with one thread (a fork after a parallel region of OpenMP can hang); with ``torch.set_num_threads(1)`` in
this process too, the parameters equal the in-process run's bit for bit. Benchmarks time schedules of the models
they build in Python with it (``benchmarks/clients.py``); between organizations use ``vsplit train``
(:mod:`vsplit.node.horizontal`).

Example:
    >>> import torch
    >>> from vsplit.topology import Horizontal, Topology
    >>> h = Horizontal(Topology.vanilla(client="client", server="lab", width=2), client="client", clients=["a", "b"])
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch...>
    >>> def sgd(params):
    ...     return torch.optim.SGD(params, lr=0.1)
    >>> def rows(n):
    ...     return {"bottom": (torch.zeros(n, 0, dtype=torch.long), torch.randn(n, 3))}
    >>> class Bottom(torch.nn.Linear):
    ...     def forward(self, cat, num):
    ...         return super().forward(num)
    >>> clients = {c: ClientSide({"bottom": Bottom(3, 2)}, rows(20), sgd) for c in ("a", "b")}
    >>> server = ServerSide({"top": torch.nn.Linear(2, 1)}, sgd,
    ...                     labels={c: (torch.rand(20) < 0.5).float() for c in ("a", "b")})
    >>> out = train_horizontal(h, Settings(kind="splitfed_v1", rounds=2, batch_size=8), clients, server)
    >>> [r["client"] for r in out["lab"].history]
    ['a', 'b', 'a', 'b']
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vsplit.app.local import run_sessions
from vsplit.errors import VsplitError
from vsplit.horizontal.schedule import Settings, stage_order
from vsplit.horizontal.sealed import new_key, public_bytes
from vsplit.horizontal.session import (
    ClientSide,
    HandoffKeys,
    HorizontalOutcome,
    ServerSide,
    client_session,
    clients_state_size,
    federated_session,
    server_session,
)
from vsplit.runtime.pump import Tap
from vsplit.topology.horizontal import Horizontal


def train_horizontal(
    h: Horizontal,
    settings: Settings,
    clients: Mapping[str, ClientSide],
    server: ServerSide | None,
    *,
    session: bytes = b"horizontal-run-1",
    taps: Iterable[Tap] = (),
    pumps: dict | None = None,
) -> dict[str, HorizontalOutcome]:
    """Train ``h`` on ``settings``'s schedule; every party's :class:`HorizontalOutcome` by name.

    Sealed hand-offs use fresh X25519 keys for this run (between organizations each client's key is configured).
    """
    sessions = {p: make() for p, make in _sessions(h, settings, clients, server, session).items()}
    return run_sessions(sessions, session=session, taps=taps, pumps=pumps, order=stage_order)  # type: ignore[return-value]


def _federated(h: Horizontal, settings: Settings) -> str | None:
    fed = settings.federated_server
    return fed if fed not in (None, h.server) else None


def _sessions(h: Horizontal, settings: Settings, clients: Mapping[str, ClientSide], server: ServerSide | None,
              session: bytes) -> dict[str, Any]:
    """Every party's session, made on call (a forked child makes only its own), with fresh hand-off keys."""
    rows = {c: clients[c].rows for c in h.clients}
    run_id = session.decode(errors="replace")
    size = clients_state_size(h, settings, clients)
    own = {c: new_key() for c in h.clients}
    public = {c: public_bytes(k) for c, k in own.items()}
    makers: dict[str, Any] = {
        c: (lambda c=c: client_session(c, h, settings, rows, clients[c], HandoffKeys(own[c], public, context=session),
                                       run_id=run_id))
        for c in h.clients}
    makers[h.server] = lambda: server_session(h, settings, rows, server, run_id=run_id, state_size=size)
    fed = _federated(h, settings)
    if fed is not None:
        makers[fed] = lambda: federated_session(fed, h, settings, rows, run_id=run_id, state_size=size)
    return makers


def train_horizontal_processes(
    h: Horizontal,
    settings: Settings,
    clients: Mapping[str, ClientSide],
    server: ServerSide | None,
    *,
    run_id: str = "horizontal-processes",
    timeout: float = 1800.0,
) -> tuple[dict[str, HorizontalOutcome], dict[str, int], float]:
    """Every party's outcome (its trained segments), the bytes each party sent, and the wall seconds of the run.

    Example (not run here: it forks):
        >>> out, sent, seconds = train_horizontal_processes(h, settings, clients, server)  # doctest: +SKIP
    """
    from vsplit.transport.identity import create_identity, write_identity
    from vsplit.transport.ports import free_ports

    fed = _federated(h, settings)
    hubs = [h.server] + ([fed] if fed else [])
    makers = _sessions(h, settings, clients, server, run_id.encode())
    with tempfile.TemporaryDirectory(prefix="vsplit-processes-") as tmp:
        folder = Path(tmp)
        files = {p: write_identity(create_identity(p), folder / p) for p in makers}
        ports = dict(zip(hubs, free_ports(2), strict=False))
        began = time.perf_counter()
        children = {}
        for party, make in makers.items():
            pid = os.fork()
            if pid == 0:  # the child: run this party, write its result, leave without returning to the caller
                code = 1
                try:
                    _child(party, make, h, settings, files, ports, hubs, run_id, folder / f"{party}.npz")
                    code = 0
                except BaseException:  # the child's own error, on its stderr (the parent reports the exit code)
                    import traceback

                    traceback.print_exc()
                finally:
                    os._exit(code)
            children[party] = pid
        failed = _wait(children, timeout)
        seconds = time.perf_counter() - began
        if failed:
            raise VsplitError(f"processes run: {', '.join(failed)} failed (exit codes {failed})")
        outcomes, sent = {}, {}
        for party in makers:
            given = clients[party].modules if party in clients else server.modules if server is not None else {}
            modules, sent[party] = _read(folder / f"{party}.npz", given)
            outcomes[party] = HorizontalOutcome(modules=modules)
    return outcomes, sent, seconds


def _child(party: str, make: Any, h: Horizontal, settings: Settings, files: Mapping[str, Any],
           ports: Mapping[str, int], hubs: list[str], run_id: str, out: Path) -> None:
    import numpy as np
    import torch

    from vsplit.node import session_id
    from vsplit.runtime.drive import drive
    from vsplit.runtime.pump import Pump
    from vsplit.transport.connect import Listener, dial
    from vsplit.transport.pinning import Credentials

    torch.set_num_threads(1)

    def creds(peers: list[str]) -> Credentials:
        return Credentials.load(party, own_cert=files[party].cert_path, own_key=files[party].key_path,
                                peers={p: files[p].cert_path for p in peers})

    if party in hubs:
        with Listener(creds(list(h.clients)), address=("127.0.0.1", ports[party])) as listener:
            channels = dict(listener.accept_all(deadline_s=120))
    else:
        channels = {hub: dial(creds([hub]), peer=hub, address=("127.0.0.1", ports[hub]), deadline_s=120)
                    for hub in hubs}
    pump = Pump(party, channels, session=session_id(run_id), timeout=600.0, hold=True,
                drops=settings.kind != "sequential")
    try:
        outcome = drive(make(), pump)
    finally:
        for channel in channels.values():
            channel.close()
    arrays = {f"{seg}/{k}": v.detach().numpy() for seg, m in outcome.modules.items() for k, v in m.state_dict().items()}
    np.savez(out, **arrays, __sent__=np.array(pump.stats.total("sent"), np.int64))


def _wait(children: Mapping[str, int], timeout: float) -> dict[str, int]:
    deadline, failed, pending = time.monotonic() + timeout, {}, dict(children)
    while pending:
        for party, pid in list(pending.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                del pending[party]
                code = os.waitstatus_to_exitcode(status)
                if code:
                    failed[party] = code
        if pending and time.monotonic() > deadline:
            for pid in pending.values():
                os.kill(pid, 9)
            raise VsplitError(f"processes run: {sorted(pending)} did not finish within {timeout:.0f} s")
        time.sleep(0.01)
    return failed


def _read(path: Path, given: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """The party's trained segments (copies of its ``given`` modules with the child's tensors) and its bytes sent."""
    import copy

    import numpy as np
    import torch

    with np.load(path, allow_pickle=False) as saved:
        arrays = {k: saved[k] for k in saved.files}
    sent = int(arrays.pop("__sent__"))
    modules = {}
    for seg in {k.split("/", 1)[0] for k in arrays}:
        modules[seg] = copy.deepcopy(given[seg])
        modules[seg].load_state_dict({k.split("/", 1)[1]: torch.from_numpy(v) for k, v in arrays.items()
                                      if k.split("/", 1)[0] == seg})
    return modules, sent
