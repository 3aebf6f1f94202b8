"""Transport benchmarks; prints one JSON object.

Each measurement is a function returning a dict of keys; ``main`` merges them. To add one (e.g. ``tls_epoch_s``,
``inprocess_epoch_s`` and ``ratio`` from a two-process training run), write ``measure_...() -> dict`` and append
it to ``MEASUREMENTS``.

Keys:
  framing_overhead  bytes on the wire (TLS records, 4-byte length prefix, codec header) for one 1024 x 64 float32
                    embedding batch, divided by the tensor's own bytes; counted by the channel on the raw socket,
                    which the wire-tap test checks against a TCP proxy. Target <= 1.01.
  tls_roundtrip_ms  median time to send a 128 KiB frame over mutual TLS on 127.0.0.1 and get 128 KiB back.

Run: .venv/bin/python benchmarks/transport.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vsplit.protocol.message import Message, message
from vsplit.transport import codec
from vsplit.transport.connect import Listener, dial
from vsplit.transport.identity import create_identity, write_identity
from vsplit.transport.pinning import Credentials
from vsplit.transport.tls import TlsChannel

SESSION = b"benchmark-sessio"


@message(0x7E30)
@dataclass(frozen=True)
class EmbeddingBatch(Message):
    """Stand-in for the training protocol's embedding message: a step and a batch of embeddings."""

    step: int
    embeddings: np.ndarray


@contextmanager
def tls_pair() -> Iterator[tuple[TlsChannel, TlsChannel]]:
    """A hub channel and a partner channel joined by mutual TLS on 127.0.0.1."""
    with tempfile.TemporaryDirectory() as tmp:
        ids = {p: write_identity(create_identity(p), Path(tmp)) for p in ("bank", "insurer")}

        def creds(me: str, peer: str) -> Credentials:
            return Credentials.load(me, own_cert=ids[me].cert_path, own_key=ids[me].key_path,
                                    peers={peer: ids[peer].cert_path})

        hub = Listener(creds("bank", "insurer"), address=("127.0.0.1", 0))
        with ThreadPoolExecutor(max_workers=1) as pool:
            accepted = pool.submit(hub.accept_all, deadline_s=30)
            partner = dial(creds("insurer", "bank"), peer="bank", address=hub.address, deadline_s=30)
            hub_side = accepted.result()["insurer"]
        try:
            yield hub_side, partner
        finally:
            partner.close()
            hub_side.close()


def measure_framing_overhead() -> dict[str, float]:
    batch = EmbeddingBatch(step=1, embeddings=np.random.default_rng(0).standard_normal((1024, 64), dtype=np.float32))
    frame = codec.encode(batch, session=SESSION, seq=0)
    with tls_pair() as (hub_side, partner):
        ratios = []
        for _ in range(5):
            before = partner.wire_stats.wire_bytes_sent
            partner.send(frame)
            hub_side.recv(timeout=30)
            ratios.append((partner.wire_stats.wire_bytes_sent - before) / batch.embeddings.nbytes)
    return {"framing_overhead": round(statistics.median(ratios), 5)}


def measure_tls_roundtrip(*, size: int = 128 * 1024, rounds: int = 200, warmup: int = 20) -> dict[str, float]:
    payload = np.random.default_rng(1).bytes(size)
    with tls_pair() as (hub_side, partner):
        times = []
        for i in range(warmup + rounds):
            start = time.perf_counter()
            partner.send(payload)
            hub_side.send(hub_side.recv(timeout=30))
            partner.recv(timeout=30)
            if i >= warmup:
                times.append(time.perf_counter() - start)
    return {"tls_roundtrip_ms": round(statistics.median(times) * 1000, 3)}


MEASUREMENTS: list[Callable[[], dict[str, float]]] = [measure_framing_overhead, measure_tls_roundtrip]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Transport benchmarks; prints one JSON object.")
    parser.add_argument("--only", nargs="*", help="run only these measurements (function names without measure_)")
    args = parser.parse_args(argv)
    results: dict[str, float] = {}
    for measure in MEASUREMENTS:
        if args.only and measure.__name__.removeprefix("measure_") not in args.only:
            continue
        results.update(measure())
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
