"""How long the pinned partner takes to connect while strangers flood the hub's port (docs/pilot.md, "Strangers").

Each attacker holds one TCP connection to the hub and reopens it as soon as the hub closes it, as in issue 29's
attack. ``idle`` attackers send nothing; ``partial`` ones send the first bytes of a TLS record and stall (the hub
closes both after ``network.first_record_timeout_s``: neither takes a handshake slot); ``hello`` ones send a whole,
genuine TLS ClientHello and stall, each holding a handshake slot for the handshake timeout (10 s), from 16 other
loopback addresses: with ``network.allow_from`` set to the partner's address they are closed at once; without it
they can fill the 32 general slots (4 per address) and delay the partner's first connection (the documented limit).
Per scenario, the partner dials a fresh hub ``--trials`` times; the figure is the time from its dial to its
authenticated channel. The attackers run in a child process, so they do not share this process's GIL.

    .venv/bin/python benchmarks/stranger_flood.py   # prints JSON, writes benchmarks/results-stranger-flood.json

Traffic stays on 127.0.0.0/8; every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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

#: The first bytes of a TLS handshake record, and no more: not a whole record.
TLS_START = b"\x16\x03\x01"


def client_hello() -> bytes:
    """A genuine TLS 1.3 ClientHello (one whole record): what a stranger needs no key to send."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class Flood:
    """``n`` strangers connected to ``address``, each reopening its connection when the listener closes it, until
    :meth:`stop` (or ``limit_s``). ``sends``: what each sends after connecting, then nothing more (``b""``: idle;
    :data:`TLS_START`; :func:`client_hello`). ``sources``: the local addresses to connect from, in turn."""

    def __init__(self, address: tuple[str, int], *, n: int = 64, sends: bytes = b"",
                 sources: tuple[str, ...] = ("127.0.0.1",), limit_s: float = 300.0) -> None:
        self.address, self.n, self.sends, self.sources, self.limit_s = address, n, sends, sources, limit_s
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
                if self.sends:
                    sock.sendall(self.sends)
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


def _connect_once(ids: dict, *, port: int, allow: tuple[str, ...], deadline_s: float) -> float | None:
    """A fresh hub on ``port``; the partner dials it; the seconds from dial to channel (None: not within
    ``deadline_s``)."""
    from vsplit.errors import TransportError
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
        try:
            channel = dial_resumable(partner, peer="bank", address=hub.address, deadline_s=deadline_s)
        except TransportError:
            return None
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


MODES = {"idle": b"", "partial": TLS_START, "hello": None}
#: the attackers of a mode, from these local addresses (16 for the ones that would hold handshake slots)
SPREAD = tuple(f"127.0.0.{i}" for i in range(2, 18))


def _attack(port: int, n: int, mode: str, seconds: float) -> None:
    """The child process: flood 127.0.0.1:port for ``seconds``."""
    sends = MODES[mode] if MODES[mode] is not None else client_hello()
    sources = ("127.0.0.1",) if mode == "idle" else SPREAD
    flood = Flood(("127.0.0.1", port), n=n, sends=sends, sources=sources, limit_s=seconds).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())  # the trial is over
    done.wait(seconds)
    flood.stop()
    print(json.dumps({"opened": flood.opened, "closed": flood.closed}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attackers", type=int, default=64)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--attack", nargs=4, metavar=("PORT", "N", "MODE", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attack:
        port, n, mode, seconds = args.attack
        _attack(int(port), int(n), mode, float(seconds))
        return
    load_before = [round(x, 2) for x in os.getloadavg()]
    a, k = args.attackers, args.trials
    # name: (attackers, mode, allow_from, trials, the partner's dial deadline)
    scenarios = {"no attackers": (0, "idle", (), k, 10.0),
                 f"{a} idle": (a, "idle", (), k, 10.0),
                 f"{a} partial TLS record, 16 addresses": (a, "partial", (), k, 10.0),
                 f"{a} ClientHello then stall, 16 addresses, allow_from": (a, "hello", ("127.0.0.1",), k, 10.0),
                 f"{a} ClientHello then stall, 16 addresses, no allow_from": (a, "hello", (), 2, 20.0)}
    out: dict = {"attackers": a, "trials": args.trials, "scenarios": {}}
    with tempfile.TemporaryDirectory() as tmp:
        ids = _identities(Path(tmp))
        for name, (n, mode, allow, trials, deadline_s) in scenarios.items():
            times: list[float | None] = []
            flood_counts = []
            for _ in range(trials):
                port = _free_port()
                child = None
                if n:
                    child = subprocess.Popen([sys.executable, __file__, "--attack", str(port), str(n), mode,
                                              str(deadline_s + 4)], stdout=subprocess.PIPE, text=True)
                try:
                    times.append(_connect_once(ids, port=port, allow=allow, deadline_s=deadline_s))
                finally:
                    if child is not None:
                        child.terminate()
                        flood_counts.append(json.loads(child.communicate(timeout=60)[0] or "{}"))
            done = [t for t in times if t is not None]
            out["scenarios"][name] = {
                "connect_s": [None if t is None else round(t, 3) for t in times],
                "median_s": round(statistics.median(done), 3) if done else None,
                "max_s": round(max(done), 3) if done else None,
                "failed": f"{len(times) - len(done)} of {len(times)} (not connected within {deadline_s} s)",
                "attacker_connections": flood_counts}
    out["load_avg"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
    out["cpus"] = os.cpu_count()
    from vsplit import strict_json

    text = strict_json.dumps(out, indent=2)
    print(text)
    (HERE / "results-stranger-flood.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
