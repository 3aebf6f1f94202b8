"""How long the pinned partner takes to connect while strangers flood the hub's port (docs/pilot.md, "Strangers").

Each attacker holds one TCP connection to the hub and reopens it as soon as the hub closes it, as in issue 29's
attack. ``idle`` attackers send nothing (the hub closes them after ``network.first_record_timeout_s``); ``stall``
attackers send the first bytes of a TLS record and then nothing (each would hold a handshake slot for the whole
handshake timeout), from 16 other loopback addresses, against a hub with ``network.allow_from`` set to the
partner's address. Per scenario, the partner dials a fresh hub ``--trials`` times; the figure is the time from its
dial to its authenticated channel. The attackers run in a child process, so they do not share this process's GIL.

    .venv/bin/python benchmarks/stranger_flood.py   # prints JSON, writes benchmarks/results-stranger-flood.json

Traffic stays on 127.0.0.0/8; every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

#: The first bytes of a TLS handshake record: enough to leave the waiting room and ask for a handshake slot.
TLS_START = b"\x16\x03\x01"


class Flood:
    """``n`` strangers connected to ``address``, each reopening its connection when the listener closes it, until
    :meth:`stop` (or ``limit_s``). ``stall``: send :data:`TLS_START` and then nothing. ``sources``: the local
    addresses to connect from, in turn."""

    def __init__(self, address: tuple[str, int], *, n: int = 64, stall: bool = False,
                 sources: tuple[str, ...] = ("127.0.0.1",), limit_s: float = 300.0) -> None:
        self.address, self.n, self.stall, self.sources, self.limit_s = address, n, stall, sources, limit_s
        #: connections opened, and how many of them the listener closed
        self.opened = self.closed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._up = threading.Event()
        self._threads = [threading.Thread(target=self._attacker, args=(i,), daemon=True) for i in range(n)]
        self._threads.append(threading.Thread(target=self._probe, daemon=True))

    def start(self) -> Flood:
        """Start the attackers; they wait until the listener is up (a single probe connects every 20 ms until then:
        many attackers hammering a port nobody listens on yet could take it by a TCP self-connect)."""
        for thread in self._threads:
            thread.start()
        return self

    def _probe(self) -> None:
        end = time.monotonic() + self.limit_s
        while not self._stop.is_set() and time.monotonic() < end:
            sock = self._connect(self.sources[0])
            if sock is not None:
                sock.close()
                self._up.set()
                return
            self._stop.wait(0.02)

    def _connect(self, source: str) -> socket.socket | None:
        try:
            sock = socket.create_connection(self.address, timeout=1.0, source_address=(source, 0))
        except OSError:
            return None
        if sock.getsockname() == sock.getpeername():  # a TCP self-connect: nobody listens there
            sock.close()
            return None
        return sock

    def wait_connected(self, *, timeout_s: float = 30.0) -> None:
        """Wait until every attacker has had a connection open at least once."""
        end = time.monotonic() + timeout_s
        while self.opened < self.n and time.monotonic() < end:
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop every attacker and close its connection."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2)

    def _attacker(self, i: int) -> None:
        source = self.sources[i % len(self.sources)]
        end = time.monotonic() + self.limit_s
        while not self._up.wait(0.05):
            if self._stop.is_set() or time.monotonic() > end:
                return
        while not self._stop.is_set() and time.monotonic() < end:
            sock = self._connect(source)
            if sock is None:
                self._stop.wait(0.05)  # the hub is not listening any more
                continue
            with self._lock:
                self.opened += 1
            try:
                if self.stall:
                    sock.sendall(TLS_START)
                sock.settimeout(0.2)
                while not self._stop.is_set() and time.monotonic() < end:
                    try:
                        if not sock.recv(4096):
                            break  # the hub closed it: open another at once
                    except TimeoutError:
                        continue
                    except OSError:
                        break
                with self._lock:
                    self.closed += 1
            finally:
                sock.close()


def _identities(folder: Path) -> dict:
    from vsplit.transport.identity import create_identity, write_identity

    return {p: write_identity(create_identity(p), folder, force=True) for p in ("bank", "partner")}


def _connect_once(ids: dict, *, port: int, allow: tuple[str, ...]) -> float:
    """A fresh hub on ``port``; the partner dials it; the seconds from dial to channel."""
    from vsplit.transport.admission import AdmissionPolicy
    from vsplit.transport.pinning import Credentials
    from vsplit.transport.reconnect import StandingListener, dial_resumable

    bank = Credentials.load("bank", own_cert=ids["bank"].cert_path, own_key=ids["bank"].key_path,
                            peers={"partner": ids["partner"].cert_path})
    partner = Credentials.load("partner", own_cert=ids["partner"].cert_path, own_key=ids["partner"].key_path,
                               peers={"bank": ids["bank"].cert_path})
    hub = StandingListener(bank, address=("127.0.0.1", port), admission=AdmissionPolicy(allow=allow))
    try:
        time.sleep(2.0)  # the flood fills the port first
        started = time.perf_counter()
        channel = dial_resumable(partner, peer="bank", address=hub.address, deadline_s=30)
        seconds = time.perf_counter() - started
        accepted = hub.accept_all(deadline_s=10)
        channel.close()
        for other in accepted.values():
            other.close()
        return seconds
    finally:
        hub.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _attack(port: int, n: int, stall: bool, seconds: float) -> None:
    """The child process: flood 127.0.0.1:port for ``seconds``."""
    sources = tuple(f"127.0.0.{i}" for i in range(2, 18)) if stall else ("127.0.0.1",)
    flood = Flood(("127.0.0.1", port), n=n, stall=stall, sources=sources, limit_s=seconds).start()
    time.sleep(seconds)
    flood.stop()
    print(json.dumps({"opened": flood.opened, "closed": flood.closed}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", type=int, default=64)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--attack", nargs=4, metavar=("PORT", "N", "STALL", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attack:
        port, n, stall, seconds = args.attack
        _attack(int(port), int(n), stall == "1", float(seconds))
        return
    load_before = [round(x, 2) for x in os.getloadavg()]
    scenarios = {"no attackers": (0, False, ()), f"{args.attackers} idle": (args.attackers, False, ()),
                 f"{args.attackers} stalling TLS, allow_from": (args.attackers, True, ("127.0.0.1",))}
    out: dict = {"attackers": args.attackers, "trials": args.trials, "scenarios": {}}
    with tempfile.TemporaryDirectory() as tmp:
        ids = _identities(Path(tmp))
        for name, (n, stall, allow) in scenarios.items():
            times, flood_counts = [], []
            for _ in range(args.trials):
                port = _free_port()
                child = None
                if n:
                    child = subprocess.Popen([sys.executable, __file__, "--attack", str(port), str(n),
                                              "1" if stall else "0", "6"], stdout=subprocess.PIPE, text=True)
                try:
                    times.append(_connect_once(ids, port=port, allow=allow))
                finally:
                    if child is not None:
                        flood_counts.append(json.loads(child.communicate(timeout=30)[0] or "{}"))
            out["scenarios"][name] = {"connect_s": [round(t, 3) for t in times],
                                      "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                                      "attacker_connections": flood_counts}
    out["load_avg"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    out["cpus"] = os.cpu_count()
    from vsplit import strict_json

    text = strict_json.dumps(out, indent=2)
    print(text)
    (HERE / "results-stranger-flood.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
