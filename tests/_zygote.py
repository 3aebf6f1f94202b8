"""Start ``vsplit`` command lines for the tests as forks of one process that has already imported vsplit's libraries.

A party process of the tests is a fresh ``python -m vsplit.cli.main ...`` in all but one thing: it does not import
torch, pandas, scikit-learn and vsplit again (about 5 s of CPU each, which was most of what a three-process test
spent). One *zygote* per test process imports them once, single-threaded, then forks a child for each command line:
the child takes the command's working folder, environment and log file, runs :func:`vsplit.cli.main.main` and exits
with its code. Each child is its own OS process (its own sockets, mutual TLS, signals: the tests kill, pause and
restart them as before). Libraries that start threads when imported (sf-heu's pool) are left to each child.

:func:`spawn` returns a :class:`Forked`: the part of :class:`subprocess.Popen` the tests use (``pid``, ``poll``,
``wait``, ``kill``, ``terminate``, ``send_signal``, ``returncode``). ``VSPLIT_TEST_SPAWN=exec`` starts real
interpreters instead (``tests/_pilot_support.start``), to rule the zygote out when a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

#: imported once by the zygote (no Python thread starts when they are imported)
PRELOAD = ("torch", "torch._dynamo", "numpy", "pandas", "pyarrow.parquet", "sklearn.metrics", "sklearn.linear_model",
           "cryptography.hazmat.primitives.asymmetric.x25519", "vsplit.cli.main", "vsplit.cli.run",
           "vsplit.node.aligned", "vsplit.node.boost", "vsplit.node.ensemble", "vsplit.node.scorecard",
           "vsplit.node.horizontal", "vsplit.transport.tls", "vsplit.report.writer")


# -- the zygote (this file run as a script) ----------------------------------------------------------------------
def _serve() -> None:
    """Read one JSON request a line from stdin and answer one JSON line on stdout, until stdin closes."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for name in PRELOAD:
        importlib.import_module(name)
    # no Python thread may run at a fork; the native pools these imports start (OpenBLAS's, Arrow's) are idle and
    # rebuilt in a forked child by their own fork handlers
    if threading.active_count() != 1:
        raise SystemExit(f"zygote: {threading.active_count()} Python threads after the imports; forking is unsafe")
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    codes: dict[int, int] = {}
    live: set[int] = set()

    def reap() -> None:
        while live:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            live.discard(pid)
            codes[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    for line in requests:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _child(request)  # never returns
            live.add(pid)
            answer: dict = {"pid": pid}
        else:  # "poll"
            reap()
            answer = {"code": codes.get(request["pid"])}
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()
    for pid in live:  # the test process is gone: so are its parties
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _child(request: dict) -> None:
    """In the forked child: become ``python -m vsplit.cli.main ARGS`` with the request's folder, environment and log."""
    code = 1
    try:
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND)  # spawn() created it, empty
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # line-buffered, as PYTHONUNBUFFERED
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        sys.stdin = open(0, closefd=False)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import vsplit.cli.main as cli

        sys.argv = [cli.__file__, *request["args"]]
        try:
            code = cli.main(request["args"])
        except SystemExit as exc:  # argparse, or a command that exits itself
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
    except BaseException:  # as an uncaught exception ends an interpreter: the traceback, then exit code 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


# -- the tests' side ---------------------------------------------------------------------------------------------
class Forked:
    """A command line run by a fork of the zygote: what the tests use of :class:`subprocess.Popen`."""

    def __init__(self, zygote: _Zygote, pid: int, args: list[str]) -> None:
        self.zygote, self.pid, self.args = zygote, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.ask({"op": "poll", "pid": self.pid})["code"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Zygote:
    def __init__(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, cwd=Path(__file__).resolve().parents[1])
        self.lock = threading.Lock()

    def ask(self, request: dict) -> dict:
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the test zygote exited with {self.proc.wait()}")
        return json.loads(line)


_ZYGOTE: _Zygote | None = None
_STARTING = threading.Lock()


def spawn(args: list[str], *, log: Path, cwd: Path, env: dict[str, str]) -> Forked:
    """Run ``vsplit ARGS`` in ``cwd`` with ``env``, its output in ``log``, as a fork of this test process's zygote."""
    global _ZYGOTE
    log.write_bytes(b"")  # there when spawn returns, as with Popen and a file opened by the caller
    with _STARTING:
        if _ZYGOTE is None or _ZYGOTE.proc.poll() is not None:
            _ZYGOTE = _Zygote()
    pid = _ZYGOTE.ask({"op": "spawn", "args": list(args), "log": str(log), "cwd": str(cwd), "env": env})["pid"]
    return Forked(_ZYGOTE, pid, list(args))


if __name__ == "__main__":
    _serve()
