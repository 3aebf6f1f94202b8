"""Helpers for tests that run parties as separate OS processes over mutual TLS on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import itertools
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from vsplit.pilot.configs import write_missing_configs

REPO = Path(__file__).resolve().parents[1]


#: this pytest-xdist worker's number (0 without xdist), and a counter over its block of ports
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_NEXT = itertools.count()
_BLOCK = 3000


def free_port() -> int:
    """A port for a party process to listen on: below the kernel's ephemeral range (32768 up), where every dialing
    socket takes its local port, so no outgoing connection (a stranger flood opens thousands) can take it before the
    party binds it; each xdist worker counts through its own block of ports, so two workers never pick the same."""
    base = 20000 + _BLOCK * (_WORKER % 4)
    for _ in range(_BLOCK):
        port = base + next(_NEXT) % _BLOCK
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {base}-{base + _BLOCK - 1}")


#: the init seed (:mod:`vsplit.models.secret`) every party of these tests holds: the in-process references are fitted
#: with ``random_state=0``, whose parties draw their initial weights from 0 as well, so both start from the same weights
SECRET = 0


def hand_secrets(configs: dict[str, Path], *, seed: int = SECRET) -> None:
    """Give each party of ``configs`` the init seed ``seed`` where it has none yet, as restoring a backup would."""
    import tomllib

    from vsplit.models.secret import SUFFIX, write_secret

    for path in configs.values():
        raw = tomllib.loads(path.read_text())
        key = raw.get("network", {}).get("key", "")
        target = (path.parent / key).parent / f"{raw['party']['name']}{SUFFIX}"
        if not target.exists():
            write_secret(target, seed)


def write_configs(root: Path, *, port: int, run_id: str, extra: str = "", kind: str = "vertical",
                  roles: dict[str, str] | None = None, label: str = "y", positive_label: object = "yes",
                  ) -> dict[str, Path]:
    """The pilot's party.toml files (a bank and a partner by default), on ``port``, with ``extra`` TOML appended."""
    paths = write_missing_configs(root, label=label, positive_label=positive_label, kind=kind, roles=roles)
    for path in paths.values():
        text = path.read_text().replace("127.0.0.1:7700", f"127.0.0.1:{port}")
        text = text.replace('run_id = "pilot"', f'run_id = "{run_id}"')
        text = text.replace("[network]\n", "[network]\nconnect_timeout_s = 60\nread_timeout_s = 60\n")
        path.write_text(text + extra)
    hand_secrets(paths)
    return paths


def in_process_metrics(data, **settings) -> dict:
    """The test metrics of the same split training in one process, with one torch thread as in the party processes
    (``train.threads``): a TLS run between processes reaches them exactly (``tests/test_run_tls.py``)."""
    import torch

    from vsplit.estimator import SplitClassifier
    from vsplit.evaluation import shared_test_views

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        clf = SplitClassifier(candidates="network", label_party="bank", label="y", positive_label="yes", random_state=0,
                              **settings).fit(data.train)
    finally:
        torch.set_num_threads(threads)
    return clf.evaluate(shared_test_views(data.test, label_party="bank", id_column="customer_id"))


def start(args: list[str], *, log: Path) -> Any:
    """``vsplit ARGS`` as its own OS process, its output in ``log``: a fork of the tests' zygote (tests/_zygote.py:
    vsplit and its libraries already imported), or with ``VSPLIT_TEST_SPAWN=exec`` a fresh interpreter."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if os.environ.get("VSPLIT_TEST_SPAWN") != "exec":
        from _zygote import spawn

        return spawn(args, log=log, cwd=REPO, env=env)
    handle = open(log, "w")  # the child owns it from here
    return subprocess.Popen([sys.executable, "-m", "vsplit.cli.main", *args], stdout=handle, stderr=subprocess.STDOUT,
                            env=env, cwd=REPO)


def wait_all(processes: dict[str, subprocess.Popen], logs: dict[str, Path], *, timeout: float) -> None:
    for name, proc in processes.items():
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in processes.values():
                p.kill()
            raise AssertionError(f"{name} did not finish in {timeout} s:\n{logs[name].read_text()[-3000:]}") from None
        assert code == 0, f"{name} exited with {code}:\n{logs[name].read_text()[-3000:]}"


def kill_after_buckets(proc: subprocess.Popen, state: Path, log: Path, *, buckets: int = 2,
                       timeout: float = 120) -> None:
    """Kill ``proc`` once the resumable PSI progress in ``state`` (a pair's ``state.json``) has ``buckets`` done."""
    import json
    import time

    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-2000:]
        try:
            if json.loads(state.read_text())["done"] >= buckets:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.005)
    proc.kill()


def small(data, rows: int, test_rows: int):
    """The preset's first ``rows`` training (``test_rows`` test) customers of the bank and the partner rows of the same
    customers: a run of a few seconds with the preset's columns, labels and overlap."""
    def cut(tables, n):
        ids = set(tables["bank"]["customer_id"].head(n))
        return {p: t[t["customer_id"].isin(ids)].reset_index(drop=True) for p, t in tables.items()}

    return dataclasses.replace(data, train=cut(data.train, rows), test=cut(data.test, test_rows))

