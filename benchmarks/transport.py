"""Transport benchmarks; prints one JSON object.

Each measurement is a function returning a dict of keys; ``main`` merges them. To add one (e.g. ``tls_epoch_s``,
``inprocess_epoch_s`` and ``ratio`` from a two-process training run), write ``measure_...() -> dict`` and append
it to ``MEASUREMENTS``.

Keys:
  framing_overhead  bytes on the wire (TLS records, 4-byte length prefix, codec header) for one 1024 x 64 float32
                    embedding batch, divided by the tensor's own bytes; the kernel's count of the connection's TCP
                    payload (``vsplit.transport.tcpinfo``), which the wire-tap test checks against a TCP proxy.
                    Target <= 1.01.
  tls_roundtrip_ms  median time to send a 128 KiB frame over mutual TLS on 127.0.0.1 and get 128 KiB back, over
                    a plain TLS channel (``network.reconnect_timeout_s = 0``).
  round_trip_ms     the same between two processes (a partner and an echoing hub, as parties run) over the
                    default channel: resumable (numbered frames, acks, a resend buffer), which survives a dropped
                    connection; target <= 0.35 ms.
  round_trip_ms_reconnect_off
                    the same over a plain TLS channel.
  round_trip_ms_raw_tls
                    the floor: the same echo between two processes over Python's own ``ssl.SSLSocket`` (the same
                    certificates, TLS 1.3, TCP_NODELAY; no framing, no channel, OpenSSL reading and writing the socket
                    itself), measured in the same blocks as the two above, so a machine's wake-up latency shows in
                    all three alike.
  round_trip_ms_socket_tls
                    the same echo over the channels' own TLS layer and framing (``TlsLayer``: a non-blocking
                    ``ssl.SSLSocket`` whose every SSL call holds one lock; ``open_frames``), without the channel: no
                    inbox, read lock, background reader, heartbeats or resume. What the channels' own machinery
                    costs is the gap to round_trip_ms_reconnect_off.
  tls_epoch_s, inprocess_epoch_s, ratio (= ratio_reconnect_on)
                    seconds per training epoch of the bank-marketing preset at batch 1024 (the plain network,
                    vsplit.models.recipe.PLAIN, as since this benchmark was written): bank and partner as two
                    processes over mutual TLS on 127.0.0.1 with the default (resumable) channels, and both in one
                    process; target ratio <= 1.25. Three rounds, each running the three kinds back to back in
                    another order; each figure is the median of the rounds, each ratio the median of the rounds'
                    ratios (``ratio_rounds``).
  tls_epoch_s_reconnect_off, ratio_reconnect_off
                    the same with plain TLS channels (``network.reconnect_timeout_s = 0``).
  *_batch256        the same at batch 256; target ratio_batch256 <= 1.5.
  load_average      the 1-minute load average when the run ended (the machine is shared: compare within a run).

Writes benchmarks/results-transport.json after a whole run (elsewhere with ``--out``; with ``--only``, only to
``--out``).
Run: .venv/bin/python benchmarks/transport.py [--only tls_roundtrip tls_epoch]
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
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

from vsplit.atomic import write_atomic
from vsplit.errors import TransportError
from vsplit.protocol.message import Message, message
from vsplit.transport import codec
from vsplit.transport.channel import Channel
from vsplit.transport.connect import Listener, dial
from vsplit.transport.framing import Deframer, prefix
from vsplit.transport.identity import create_identity, write_identity
from vsplit.transport.pinning import Credentials
from vsplit.transport.reconnect import StandingListener, dial_resumable
from vsplit.transport.stream import open_frames
from vsplit.transport.tls import TlsLayer

SESSION = b"benchmark-sessio"


@message(0x7E30)
@dataclass(frozen=True)
class EmbeddingBatch(Message):
    """Stand-in for the training protocol's embedding message: a step and a batch of embeddings."""

    step: int
    embeddings: np.ndarray


@contextmanager
def tls_pair(*, resumable: bool = False) -> Iterator[tuple[Channel, Channel]]:
    """A hub channel and a partner channel joined by mutual TLS on 127.0.0.1 (``resumable``: the default kind, which
    survives a dropped connection)."""
    with tempfile.TemporaryDirectory() as tmp:
        ids = {p: write_identity(create_identity(p), Path(tmp)) for p in ("bank", "insurer")}

        def creds(me: str, peer: str) -> Credentials:
            return Credentials.load(me, own_cert=ids[me].cert_path, own_key=ids[me].key_path,
                                    peers={peer: ids[peer].cert_path})

        if resumable:
            standing = StandingListener(creds("bank", "insurer"), address=("127.0.0.1", 0))
            partner: Channel = dial_resumable(creds("insurer", "bank"), peer="bank", address=standing.address,
                                              deadline_s=30)
            hub_side: Channel = standing.accept_all(deadline_s=30)["insurer"]
        else:
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
            if resumable:
                standing.close()


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


def _round_trip_ms(*, resumable: bool, size: int, rounds: int, warmup: int) -> float:
    """Median ms to send ``size`` bytes and get them back, both channel ends in this process (one thread)."""
    payload = np.random.default_rng(1).bytes(size)
    with tls_pair(resumable=resumable) as (hub_side, partner):
        times = []
        for i in range(warmup + rounds):
            start = time.perf_counter()
            partner.send(payload)
            hub_side.send(hub_side.recv(timeout=30))
            partner.recv(timeout=30)
            if i >= warmup:
                times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _credentials(ids: dict, me: str, peer: str) -> Credentials:
    return Credentials.load(me, own_cert=ids[me].cert_path, own_key=ids[me].key_path, peers={peer: ids[peer].cert_path})


def _echo(ids: dict, resumable: bool, pipe, count: int) -> None:
    """The hub in its own process: listen, tell the port, echo ``count`` frames, wait for the partner's goodbye."""
    creds = _credentials(ids, "bank", "insurer")
    hub = (StandingListener(creds, address=("127.0.0.1", 0)) if resumable
           else Listener(creds, address=("127.0.0.1", 0)))
    pipe.send(hub.address[1])
    channel = hub.accept_all(deadline_s=30)["insurer"]
    for _ in range(count):
        channel.send(channel.recv(timeout=30))
    try:
        channel.recv(timeout=30)
    except TransportError:
        pass  # the partner closed
    channel.close()
    hub.close()


def _two_process_round_trip_ms(*, resumable: bool, size: int, rounds: int, warmup: int) -> float:
    """Median ms to send ``size`` bytes to a hub in another process (as parties run) and get them back."""
    import multiprocessing

    payload = np.random.default_rng(1).bytes(size)
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp:
        ids = {p: write_identity(create_identity(p), Path(tmp)) for p in ("bank", "insurer")}
        ours, theirs = context.Pipe()
        child = context.Process(target=_echo, args=(ids, resumable, theirs, warmup + rounds))
        child.start()
        try:
            if not ours.poll(60):
                raise RuntimeError("the echoing hub process did not start")
            address = ("127.0.0.1", ours.recv())
            creds = _credentials(ids, "insurer", "bank")
            partner: Channel = (dial_resumable(creds, peer="bank", address=address, deadline_s=30) if resumable
                                else dial(creds, peer="bank", address=address, deadline_s=30))
            times = []
            for i in range(warmup + rounds):
                start = time.perf_counter()
                partner.send(payload)
                partner.recv(timeout=30)
                if i >= warmup:
                    times.append(time.perf_counter() - start)
            partner.close()
        finally:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    return statistics.median(times) * 1000


def _raw_echo(ids: dict, pipe, count: int, locked: bool) -> None:
    """The floor's hub: a bare ``ssl.SSLSocket`` server that echoes ``count`` payloads of the size it is told
    (``locked``: the channels' TLS layer and framing alone, :class:`_LockedTls`)."""
    import socket

    context = _credentials(ids, "bank", "insurer").context(server_side=True)
    with socket.create_server(("127.0.0.1", 0)) as server:
        pipe.send(server.getsockname()[1])
        size = pipe.recv()
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with context.wrap_socket(conn, server_side=True) as tls:
            if locked:
                ends = _LockedTls(tls)
                for _ in range(count):
                    ends.send_frame(ends.recv_frame())
                return
            buffer = bytearray(size)
            for _ in range(count):
                _recv_exactly(tls, buffer)
                tls.sendall(buffer)


def _recv_exactly(sock, buffer: bytearray) -> None:
    view, got = memoryview(buffer), 0
    while got < len(buffer):
        got += sock.recv_into(view[got:])


class _LockedTls:
    """The channels' own TLS layer (:class:`vsplit.transport.tls.TlsLayer`: a non-blocking ``ssl.SSLSocket`` whose
    every OpenSSL call holds one lock) with frames cut by :func:`vsplit.transport.stream.open_frames`, and nothing
    else: no inbox, read lock, background reader, heartbeats or resume. Measured beside the channels to show what
    their own machinery costs (``round_trip_ms_socket_tls``)."""

    def __init__(self, tls) -> None:
        tls.setblocking(False)
        self.layer, self.deframer, self.frames = TlsLayer(tls), Deframer(), []
        self.readable = selectors.DefaultSelector()
        self.readable.register(tls, selectors.EVENT_READ)

    def send_frame(self, payload) -> None:
        self.layer.write(prefix(payload), timeout=30)  # the channels' own length prefix
        self.layer.write(payload, timeout=30)

    def recv_frame(self) -> bytearray:
        while not self.frames:
            _, ended = open_frames(self.layer, self.deframer, self.frames)
            if ended:
                raise TransportError("the echo's peer closed")
            if not self.frames and not self.layer.buffered():
                self.readable.select(30)
        return self.frames.pop(0)


def _raw_tls_round_trip_ms(*, size: int, rounds: int, warmup: int, locked: bool = False) -> float:
    """Median ms of the same echo over bare ``ssl.SSLSocket`` ends in two processes: what TLS in Python costs alone
    (``locked``: both ends as :class:`_LockedTls`)."""
    import multiprocessing
    import socket

    payload = np.random.default_rng(1).bytes(size)
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp:
        ids = {p: write_identity(create_identity(p), Path(tmp)) for p in ("bank", "insurer")}
        ours, theirs = context.Pipe()
        child = context.Process(target=_raw_echo, args=(ids, theirs, warmup + rounds, locked))
        child.start()
        try:
            if not ours.poll(60):
                raise RuntimeError("the echoing hub process did not start")
            port = ours.recv()
            ours.send(size)
            tls_context = _credentials(ids, "insurer", "bank").context(server_side=False)
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times = []
            with tls_context.wrap_socket(sock, server_side=False) as tls:
                ends = _LockedTls(tls) if locked else None
                buffer = bytearray(size)
                for i in range(warmup + rounds):
                    start = time.perf_counter()
                    if ends is not None:
                        ends.send_frame(payload)
                        ends.recv_frame()
                    else:
                        tls.sendall(payload)
                        _recv_exactly(tls, buffer)
                    if i >= warmup:
                        times.append(time.perf_counter() - start)
        finally:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    return statistics.median(times) * 1000


def measure_tls_roundtrip(*, size: int = 128 * 1024, rounds: int = 400, warmup: int = 40) -> dict[str, float]:
    """128 KiB there and back over a plain TLS channel and over the default resumable one, alternating blocks of
    rounds so both see the same load; medians of the blocks. ``tls_roundtrip_ms``: both ends in this process, as
    before; ``round_trip_ms`` (resumable) and ``round_trip_ms_reconnect_off`` (plain): the hub in another process."""
    blocks = 4
    per = rounds // blocks
    inproc: list[float] = []
    plain: list[float] = []
    resumable: list[float] = []
    raw: list[float] = []
    locked: list[float] = []
    for _ in range(blocks):
        inproc.append(_round_trip_ms(resumable=False, size=size, rounds=per, warmup=warmup))
        raw.append(_raw_tls_round_trip_ms(size=size, rounds=per, warmup=warmup))
        locked.append(_raw_tls_round_trip_ms(size=size, rounds=per, warmup=warmup, locked=True))
        plain.append(_two_process_round_trip_ms(resumable=False, size=size, rounds=per, warmup=warmup))
        resumable.append(_two_process_round_trip_ms(resumable=True, size=size, rounds=per, warmup=warmup))
    return {"tls_roundtrip_ms": round(statistics.median(inproc), 3),
            "round_trip_ms": round(statistics.median(resumable), 3),
            "round_trip_ms_reconnect_off": round(statistics.median(plain), 3),
            "round_trip_ms_raw_tls": round(statistics.median(raw), 3),
            "round_trip_ms_socket_tls": round(statistics.median(locked), 3)}


def measure_tls_epoch(*, batch_size: int = 1024, epochs: int = 12, rounds: int = 3) -> dict[str, float]:
    """Seconds per training epoch, bank-marketing preset: two processes over mutual TLS vs. one process.

    Both use one torch thread per party (as party processes do by default, ``train.threads``), the same seeds and
    batches; no validation rows, so only training steps are timed. Each run's figure is the median over its epochs
    2.. (the first warms up). A *round* runs the one-process training and the two-process one with reconnects on and
    off, back to back, and divides: a ratio compares runs seconds apart, so a load that drifts during the measurement
    moves both sides of it. ``rounds`` rounds, each in another order (the second of two runs in a row tends to be the
    slower one on this machine); the figures are the medians of the rounds (``ratio_rounds``: each round's).
    """
    from vsplit.datasets import preset

    data = preset("bank_marketing", seed=0)
    orders = [("in", "on", "off"), ("off", "on", "in"), ("on", "in", "off")]
    seen: dict[str, list[float]] = {"in": [], "on": [], "off": []}
    for r in range(rounds):
        for kind in orders[r % len(orders)]:
            seen[kind].append(_inprocess_epoch_s(data, batch_size=batch_size, epochs=epochs) if kind == "in" else
                              _tls_epoch_s(data, batch_size=batch_size, epochs=epochs, reconnect=kind == "on"))
    on = [a / b for a, b in zip(seen["on"], seen["in"], strict=True)]
    off = [a / b for a, b in zip(seen["off"], seen["in"], strict=True)]
    med = statistics.median
    return {"tls_epoch_s": round(med(seen["on"]), 4), "tls_epoch_s_reconnect_off": round(med(seen["off"]), 4),
            "inprocess_epoch_s": round(med(seen["in"]), 4), "ratio": round(med(on), 3),
            "ratio_reconnect_on": round(med(on), 3), "ratio_reconnect_off": round(med(off), 3),
            "ratio_rounds": [round(x, 3) for x in on], "ratio_reconnect_off_rounds": [round(x, 3) for x in off],
            "epoch_batch_size": batch_size}


def _tls_epoch_s(data, *, batch_size: int, epochs: int, reconnect: bool) -> float:
    """Median seconds per epoch (after the first) of bank and partner as two processes over mutual TLS."""
    import subprocess

    from vsplit.pilot.prepare import prepare_preset
    from vsplit.transport.ports import free_ports

    settings = [f"train.batch_size={batch_size}", f"train.epochs={epochs}", "train.validation_fraction=0.0",
                "output.baselines=false", "data.test_path=\"\"", *_plain_settings()]
    if not reconnect:
        settings.append("network.reconnect_timeout_s=0")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prepare_preset(data, root)
        (port,) = free_ports(1)
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
    return statistics.median(result["epoch_seconds"][1:])


def _plain_settings() -> list[str]:
    """``--set`` overrides that make a party config train :data:`~vsplit.models.recipe.PLAIN`, the network this
    benchmark has measured since it was written (the default before issue 25's recipe), so its figures stay
    comparable; the epochs and early stopping are the benchmark's own."""
    from vsplit.models.recipe import PLAIN, config_overrides

    return list(config_overrides(PLAIN, skip=("epochs", "patience")))


def _inprocess_epoch_s(data, *, batch_size: int, epochs: int) -> float:
    """Median seconds per epoch (after the first) of the same training in one process, on one torch thread."""
    import torch

    from vsplit.estimator import SplitClassifier
    from vsplit.models.recipe import PLAIN
    from vsplit.runtime.progress import EpochClock

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        clock = EpochClock()
        SplitClassifier(**{**PLAIN, "epochs": epochs, "patience": None}, label_party="bank", label=data.label,
                        positive_label=data.positive_label, batch_size=batch_size, validation_fraction=0.0,
                        random_state=0, alignment="join", callbacks=[clock]).fit(data.train)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(clock.seconds[1:])


def measure_tls_epoch_256() -> dict[str, float]:
    """The same at batch 256, for the record (SecretFlow's simulation mode took 5 to 10 s per epoch there)."""
    out = measure_tls_epoch(batch_size=256, epochs=6)
    return {"tls_epoch_s_batch256": out["tls_epoch_s"], "inprocess_epoch_s_batch256": out["inprocess_epoch_s"],
            "ratio_batch256": out["ratio"], "tls_epoch_s_batch256_reconnect_off": out["tls_epoch_s_reconnect_off"],
            "ratio_batch256_reconnect_off": out["ratio_reconnect_off"], "ratio_batch256_rounds": out["ratio_rounds"]}


MEASUREMENTS: list[Callable[[], dict[str, float]]] = [
    measure_framing_overhead, measure_tls_roundtrip, measure_tls_epoch, measure_tls_epoch_256,
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Transport benchmarks; prints one JSON object.")
    parser.add_argument("--only", nargs="*", help="run only these measurements (function names without measure_)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the results (default: benchmarks/results-transport.json after a whole "
                             "run; with --only, nowhere unless given: a part must not replace the whole file)")
    args = parser.parse_args(argv)
    if args.out is None and not args.only:
        args.out = Path(__file__).with_name("results-transport.json")
    results: dict[str, float] = {}
    for measure in MEASUREMENTS:
        if args.only and measure.__name__.removeprefix("measure_") not in args.only:
            continue
        results.update(measure())
    results["load_average"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results))
    if args.out is not None:
        write_atomic(args.out, (json.dumps(results, indent=2) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
