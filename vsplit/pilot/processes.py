"""Every party of a pilot as its own OS process on this machine: start them, wait for all, stop them on a failure.

Example (not run here: it starts processes):
    >>> logs = {"bank": Path("runs/bank.out")}
    >>> wait({"bank": start(["train", "--config", "bank.toml"], log=logs["bank"], show=False)}, logs,
    ...      timeout=600, step="training")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vsplit.errors import VsplitError


def start(args: list[str], *, log: Path, show: bool) -> subprocess.Popen:
    """``vsplit <args>`` as a child process, its output to ``log`` (or to this terminal with ``show``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = None if show else open(log, "w")  # the child owns it from here
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # our own interpreter and module, arguments built here from config paths: no shell, no untrusted input
    return subprocess.Popen([sys.executable, "-m", "vsplit.cli.main", *args], stdout=out,  # noqa: S603
                            stderr=None if show else subprocess.STDOUT, env=env)


def wait(processes: dict[str, subprocess.Popen], logs: dict[str, Path], *, timeout: float, step: str) -> None:
    """Wait until every process has exited; on a non-zero exit stop the others and raise with the end of its log,
    past ``timeout`` seconds kill them all."""
    deadline = time.monotonic() + timeout
    pending = dict(processes)
    while pending:
        for name, proc in list(pending.items()):
            code = proc.poll()
            if code is None:
                continue
            del pending[name]
            if code != 0:
                for other in pending.values():
                    other.terminate()
                tail = logs[name].read_text()[-2000:] if logs[name].exists() else "(see the output above)"
                raise VsplitError(f"pilot {step}: {name} exited with code {code}; its log ends with:\n{tail}")
        if time.monotonic() > deadline:
            for proc in pending.values():
                proc.kill()
            raise VsplitError(f"pilot {step}: {sorted(pending)} did not finish within {timeout:.0f} s")
        time.sleep(0.05)




def run_processes(configs: Mapping[str, Path], *, overrides: tuple[str, ...] = (), timeout: float = 1800.0,
                  extra: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Run every party's ``vsplit run`` as its own OS process (mutual TLS on this machine), wait for all, and
    return each party's ``result.json``; a :class:`~vsplit.errors.VsplitError` with the log's end if one fails."""
    import json

    from vsplit.config import load_config, resolve

    loaded = {p: load_config(c, overrides=list(overrides)) for p, c in configs.items()}
    folders = {p: resolve(c, c.output.dir) / c.output.run_id for p, c in loaded.items()}
    logs = {p: folders[p] / f"{p}.out" for p in configs}
    sets = [x for item in overrides for x in ("--set", item)]
    procs = {p: start(["train", "--config", str(c), "--quiet", *sets, *extra], log=logs[p], show=False)
             for p, c in configs.items()}
    wait(procs, logs, timeout=timeout, step="training")
    return {p: json.loads((folders[p] / p / "result.json").read_text()) for p in configs}
