"""Transport benchmarks; prints one JSON object.

Each measurement is a function returning a dict of keys; ``main`` merges them. To add one (e.g. ``tls_epoch_s``,
``inprocess_epoch_s`` and ``ratio`` from a two-process training run), write ``measure_...() -> dict`` and append
it to ``MEASUREMENTS``.

Keys:
  framing_overhead  bytes on the wire (TLS records, 4-byte length prefix, codec header) for one 1024 x 64 float32
                    embedding batch, divided by the tensor's own bytes; counted by the channel on the raw socket,
                    which the wire-tap test checks against a TCP proxy. Target <= 1.01.
  tls_roundtrip_ms  median time to send a 128 KiB frame over mutual TLS on 127.0.0.1 and get 128 KiB back.
  tls_epoch_s, inprocess_epoch_s, ratio
                    seconds per training epoch of the bank-marketing preset at batch 1024: bank and partner as two
                    processes over mutual TLS on 127.0.0.1, and both in one process; target ratio <= 1.6.
  *_batch256        the same at batch 256.

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


def measure_tls_epoch(*, batch_size: int = 1024, epochs: int = 12) -> dict[str, float]:
    """Seconds per training epoch, bank-marketing preset: two processes over mutual TLS vs. one process.

    Both use one torch thread per party (as party processes do by default, ``train.threads``), the same seeds and
    batches; no validation rows, so only training steps are timed. Medians over epochs 2.. (the first warms up).
    """
    import os
    import subprocess

    import torch

    from vsplit.datasets import preset
    from vsplit.estimator import SplitClassifier
    from vsplit.pilot.orchestrate import free_port
    from vsplit.pilot.prepare import prepare_preset
    from vsplit.runtime.progress import EpochClock

    data = preset("bank_marketing", seed=0)
    settings = [f"train.batch_size={batch_size}", f"train.epochs={epochs}", "train.validation_fraction=0.0",
                "output.baselines=false", "data.test_path=\"\""]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prepare_preset(data, root)
        port = free_port()
        from vsplit.pilot.configs import write_missing_configs

        configs = write_missing_configs(root, label=data.label, positive_label=data.positive_label)
        procs = []
        for party, path in configs.items():
            address = f"network.listen=127.0.0.1:{port}" if party == "bank" else f"network.dial=127.0.0.1:{port}"
            args = [sys.executable, "-m", "vsplit.cli.main", "train", "--config", str(path), "--quiet",
                    "--set", "output.run_id=bench", "--set", address]
            args += [x for s in settings for x in ("--set", s)]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          env=dict(os.environ, PYTHONUNBUFFERED="1")))
        for proc in procs:
            _, err = proc.communicate(timeout=900)
            if proc.returncode:
                raise RuntimeError(f"party process failed: {err.decode()[-2000:]}")
        result = json.loads((root / "runs" / "bench" / "bank" / "result.json").read_text())
    tls = result["epoch_seconds"][1:]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        clock = EpochClock()
        SplitClassifier(label_party="bank", label=data.label, positive_label=data.positive_label,
                        batch_size=batch_size, epochs=epochs, validation_fraction=0.0, patience=None,
                        random_state=0, alignment="join", callbacks=[clock]).fit(data.train)
    finally:
        torch.set_num_threads(threads)
    inprocess = clock.seconds[1:]
    t, i = statistics.median(tls), statistics.median(inprocess)
    return {"tls_epoch_s": round(t, 4), "inprocess_epoch_s": round(i, 4), "ratio": round(t / i, 3),
            "epoch_batch_size": batch_size}


def measure_tls_epoch_256() -> dict[str, float]:
    """The same at batch 256, for the record (SecretFlow's simulation mode took 5 to 10 s per epoch there)."""
    out = measure_tls_epoch(batch_size=256, epochs=6)
    return {"tls_epoch_s_batch256": out["tls_epoch_s"], "inprocess_epoch_s_batch256": out["inprocess_epoch_s"],
            "ratio_batch256": out["ratio"]}


MEASUREMENTS: list[Callable[[], dict[str, float]]] = [
    measure_framing_overhead, measure_tls_roundtrip, measure_tls_epoch, measure_tls_epoch_256,
]


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
