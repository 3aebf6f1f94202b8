"""What a dropped connection costs a resumable channel; prints one JSON object.

A bank and a partner, joined by resumable mutual-TLS channels (:mod:`vsplit.transport.resume`) through the link
emulator (``benchmarks/linkem.py``), stream small numbered frames both ways, one every 5 ms. The emulator resets
the connection several times; after each reset the partner redials, both sides re-authenticate and resend.

Keys:
  rtt_ms, mbit        the emulated link
  handshake_s         median time to open a resumable channel through the link from scratch: TCP connect, TLS 1.3
                      handshake with both certificates, hello, RESUME exchange (what a reconnection repeats)
  pause_s             per reset and direction: seconds from the reset to the first frame that arrived after it
  pause_median_s, pause_max_s, pause_median_rtts
  beyond_handshake_rtts
                      (median pause - handshake_s) / RTT: what a reconnection costs beyond a fresh connection
  duplicates_dropped  frames that arrived twice (in flight when the link died, resent) and were dropped
  exactly_once        every frame arrived exactly once and in order, in both directions
  loopback_roundtrip_us
                      what the resumable layer costs while nothing drops: median round trip of a 64-byte and a
                      16 KiB frame on 127.0.0.1, over a plain TLS channel and over a resumable one

Run: .venv/bin/python benchmarks/reconnect.py [--rtt-ms 20] [--mbit 100] [--resets 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from linkem import LinkEmulator

from vsplit.transport.connect import Listener, dial
from vsplit.transport.identity import create_identity, write_identity
from vsplit.transport.pinning import Credentials
from vsplit.transport.reconnect import StandingListener, dial_resumable
from vsplit.transport.resume import ResumableChannel, ResumeOptions


def _credentials(ids: dict, me: str, peer: str) -> Credentials:
    return Credentials.load(me, own_cert=ids[me].cert_path, own_key=ids[me].key_path, peers={peer: ids[peer].cert_path})


def _stream(channel: ResumableChannel, stop: threading.Event, spacing_s: float) -> None:
    i = 0
    while not stop.is_set():
        channel.send(i.to_bytes(8, "little") * 32)
        i += 1
        time.sleep(spacing_s)
    channel.send(b"end")


def _receive(channel: ResumableChannel, arrivals: list[tuple[int, float]]) -> None:
    while True:
        frame = channel.recv(timeout=60)
        if bytes(frame) == b"end":
            return
        arrivals.append((int.from_bytes(frame[:8], "little"), time.monotonic()))


def pause_after(reset_at: float, arrivals: list[tuple[int, float]], *, until: float) -> float:
    """Seconds from a reset to the frame that ended its outage: the one after the longest silence before ``until``
    (the next reset). Frames the relay delivered just before the reset may still be read just after it: they do not
    end the outage."""
    before = [t for _, t in arrivals if t <= reset_at][-1:]
    times = before + [t for _, t in arrivals if reset_at < t < until]
    _, resumed = max((b - a, b) for a, b in itertools.pairwise(times))
    return resumed - reset_at


def measure(*, rtt_ms: float, mbit: float, resets: int, spacing_s: float = 0.005) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        ids = {p: write_identity(create_identity(p), Path(tmp)) for p in ("bank", "partner")}
        resume = ResumeOptions(timeout_s=30)
        dial = _credentials(ids, "partner", "bank")

        def joined() -> tuple[StandingListener, LinkEmulator]:
            hub = StandingListener(_credentials(ids, "bank", "partner"), address=("127.0.0.1", 0), resume=resume)
            return hub, LinkEmulator(target=hub.address, delay_s=rtt_ms / 2000, bandwidth_bps=mbit * 1e6)

        handshakes = []
        for _ in range(5):  # whole channels from scratch: what one reconnection repeats
            hub, link = joined()
            began = time.monotonic()
            probe = dial_resumable(dial, peer="bank", address=link.address, resume=resume)
            handshakes.append(time.monotonic() - began)
            for channel in (probe, hub.accept_all(deadline_s=30)["partner"]):
                channel.close()
            link.close()
        hub, link = joined()
        partner = dial_resumable(dial, peer="bank", address=link.address, resume=resume)
        bank = hub.accept_all(deadline_s=30)["partner"]
        stop = threading.Event()
        at_bank: list[tuple[int, float]] = []
        at_partner: list[tuple[int, float]] = []
        threads = [threading.Thread(target=_stream, args=(partner, stop, spacing_s)),
                   threading.Thread(target=_stream, args=(bank, stop, spacing_s)),
                   threading.Thread(target=_receive, args=(bank, at_bank)),
                   threading.Thread(target=_receive, args=(partner, at_partner))]
        for thread in threads:
            thread.start()
        marks = []
        for _ in range(resets):
            time.sleep(0.5)
            marks.append(time.monotonic())
            link.reset_now()
        time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        duplicates = bank.duplicates + partner.duplicates
        partner.close()
        bank.close()
        hub.close()
        link.close()
    ends = [*marks[1:], float("inf")]
    pauses = [pause_after(mark, arrivals, until=end) for mark, end in zip(marks, ends, strict=True)
              for arrivals in (at_bank, at_partner)]
    pause, handshake, rtt = statistics.median(pauses), statistics.median(handshakes), rtt_ms / 1000
    exact = all([i for i, _ in got] == list(range(len(got))) for got in (at_bank, at_partner))
    return {
        "rtt_ms": rtt_ms, "mbit": mbit, "resets": resets,
        "handshake_s": round(handshake, 4),
        "pause_s": [round(p, 4) for p in pauses],
        "pause_median_s": round(pause, 4),
        "pause_max_s": round(max(pauses), 4),
        "pause_median_rtts": round(pause / rtt, 2),
        "beyond_handshake_rtts": round((pause - handshake) / rtt, 2),
        "duplicates_dropped": duplicates,
        "exactly_once": exact,
    }


def _roundtrip_us(a, b, size: int, rounds: int = 400, warmup: int = 50) -> float:
    payload, times = bytes(size), []
    for i in range(warmup + rounds):
        began = time.perf_counter()
        a.send(payload)
        b.send(b.recv(timeout=10))
        a.recv(timeout=10)
        if i >= warmup:
            times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1e6, 1)


def measure_overhead() -> dict:
    """Round trips on 127.0.0.1 over plain and resumable TLS channels, no link emulator."""
    with tempfile.TemporaryDirectory() as tmp:
        ids = {p: write_identity(create_identity(p), Path(tmp)) for p in ("bank", "partner")}
        hub = Listener(_credentials(ids, "bank", "partner"), address=("127.0.0.1", 0))
        with ThreadPoolExecutor(max_workers=1) as pool:
            accepted = pool.submit(hub.accept_all, deadline_s=30)
            plain = (dial(_credentials(ids, "partner", "bank"), peer="bank", address=hub.address),)
            plain += (accepted.result()["partner"],)
        standing = StandingListener(_credentials(ids, "bank", "partner"), address=("127.0.0.1", 0))
        resumable = (dial_resumable(_credentials(ids, "partner", "bank"), peer="bank", address=standing.address),)
        resumable += (standing.accept_all(deadline_s=30)["partner"],)
        out = {f"{kind}_{size}B": _roundtrip_us(*pair, size) for size in (64, 16384)
               for kind, pair in (("tls", plain), ("resumable", resumable))}
        for channel in (*plain, *resumable):
            channel.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--mbit", type=float, default=100.0)
    parser.add_argument("--resets", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("vsplit").setLevel(logging.ERROR)  # each reset logs a drop and a restore: expected here
    result = measure(rtt_ms=args.rtt_ms, mbit=args.mbit, resets=args.resets)
    result["loopback_roundtrip_us"] = measure_overhead()
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
