"""Run a horizontal schedule with every party as its own OS process over mutual TLS on this machine.

Theory of operation. :func:`train_horizontal_processes` takes the same arguments as
:func:`~vsplit.horizontal.run.train_horizontal` (built in this process: the clients' rows, the segments, the
optimizers), gives every party a fresh identity and a port, and forks one child process per party (POSIX). Each
child opens its mutual-TLS channels (the server and a federated server listen, each client dials them), runs its
own session (:mod:`vsplit.horizontal.session`) over one pump that holds each peer's frames for their stage, and
writes what it ends with (its segments' tensors, the bytes it sent, its seconds) to a file of numpy arrays
(``allow_pickle=False``) that the parent reads back. Nothing but TLS frames passes between the parties while they
train, so timings and bytes are those of separate processes. Each child computes with one thread (a fork after a
parallel region of OpenMP can hang); with ``torch.set_num_threads(1)`` in this process too, the parameters equal
the in-process run's bit for bit.
Benchmarks use it to time schedules with the models they build in Python (``benchmarks/clients.py``); between
organizations use ``vsplit run`` (:mod:`vsplit.node.horizontal`).

Example (not run here: it forks):
    >>> out, sent, seconds = train_horizontal_processes(h, settings, clients, server)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vsplit.errors import VsplitError
from vsplit.horizontal.schedule import Settings
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
from vsplit.topology.horizontal import Horizontal
from vsplit.transport.ports import free_ports


def train_horizontal_processes(
    h: Horizontal,
    settings: Settings,
    clients: Mapping[str, ClientSide],
    server: ServerSide | None,
    *,
    run_id: str = "horizontal-processes",
    timeout: float = 1800.0,
) -> tuple[dict[str, HorizontalOutcome], dict[str, int], float]:
    """Every party's outcome (its trained segments), the bytes each party sent, and the wall seconds of the run."""
    from vsplit.horizontal.sealed import new_key, public_bytes
    from vsplit.transport.identity import create_identity, write_identity

    fed = settings.federated_server if settings.federated_server not in (None, h.server) else None
    parties = [*h.clients, h.server] + ([fed] if fed else [])
    rows = {c: clients[c].rows for c in h.clients}
    size = clients_state_size(h, settings, clients)
    handoff = {c: new_key() for c in h.clients}
    publics = {c: public_bytes(k) for c, k in handoff.items()}
    with tempfile.TemporaryDirectory(prefix="vsplit-processes-") as tmp:
        folder = Path(tmp)
        files = {p: write_identity(create_identity(p), folder / p) for p in parties}
        ports = dict(zip([h.server] + ([fed] if fed else []), free_ports(2), strict=False))
        began = time.perf_counter()
        children = {}
        for party in parties:
            pid = os.fork()
            if pid == 0:  # the child: run this party, write its result, leave without returning to the caller
                code = 1
                try:
                    _child(party, h, settings, clients, server, rows, files, ports, fed, run_id, size,
                           HandoffKeys(handoff[party], publics, context=run_id.encode()) if party in handoff else None,
                           folder / f"{party}.npz")
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
        for party in parties:
            modules, nbytes = _read(folder / f"{party}.npz", party, clients, server)
            outcomes[party], sent[party] = HorizontalOutcome(modules=modules), nbytes
    return outcomes, sent, seconds


def _child(party: str, h: Horizontal, settings: Settings, clients: Mapping[str, ClientSide],
           server: ServerSide | None, rows: Mapping[str, int], files: Mapping[str, Any], ports: Mapping[str, int],
           fed: str | None, run_id: str, size: int, keys: HandoffKeys | None, out: Path) -> None:
    from vsplit.node import session_id
    from vsplit.runtime.drive import drive
    from vsplit.runtime.pump import Pump

    torch.set_num_threads(1)
    channels = _channels(party, h, files, ports, fed)
    pump = Pump(party, channels, session=session_id(run_id), timeout=600.0, hold=True,
                drops=settings.kind != "sequential")
    if party in h.clients:
        session = client_session(party, h, settings, rows, clients[party], keys, run_id=run_id)
    elif party == h.server:
        session = server_session(h, settings, rows, server, run_id=run_id, state_size=size)
    else:
        session = federated_session(party, h, settings, rows, run_id=run_id, state_size=size)
    try:
        outcome = drive(session, pump)
    finally:
        for channel in channels.values():
            channel.close()
    arrays = {f"{seg}/{k}": v.detach().numpy() for seg, m in outcome.modules.items() for k, v in m.state_dict().items()}
    np.savez(out, **arrays, __sent__=np.array(pump.stats.total("sent"), np.int64))


def _channels(party: str, h: Horizontal, files: Mapping[str, Any], ports: Mapping[str, int],
              fed: str | None) -> dict[str, Any]:
    from vsplit.transport.connect import Listener, dial
    from vsplit.transport.pinning import Credentials

    def creds(peers: list[str]) -> Credentials:
        return Credentials.load(party, own_cert=files[party].cert_path, own_key=files[party].key_path,
                                peers={p: files[p].cert_path for p in peers})

    hubs = [p for p in (h.server, fed) if p]
    if party in hubs:
        with Listener(creds(list(h.clients)), address=("127.0.0.1", ports[party])) as listener:
            return dict(listener.accept_all(deadline_s=120))
    return {hub: dial(creds([hub]), peer=hub, address=("127.0.0.1", ports[hub]), deadline_s=120) for hub in hubs}


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


def _read(path: Path, party: str, clients: Mapping[str, ClientSide], server: ServerSide | None,
          ) -> tuple[dict[str, torch.nn.Module], int]:
    """The party's trained segments (copies of the given modules with the child's tensors) and its bytes sent."""
    import copy

    with np.load(path, allow_pickle=False) as saved:
        arrays = {k: saved[k] for k in saved.files}
    sent = int(arrays.pop("__sent__"))
    given = dict(clients[party].modules) if party in clients else dict(server.modules) if server is not None else {}
    modules = {}
    for seg in {k.split("/", 1)[0] for k in arrays}:
        module = copy.deepcopy(given[seg])
        module.load_state_dict({k.split("/", 1)[1]: torch.from_numpy(v) for k, v in arrays.items()
                                if k.split("/", 1)[0] == seg})
        modules[seg] = module
    return modules, sent
