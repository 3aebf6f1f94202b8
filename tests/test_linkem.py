"""The link emulator of benchmarks/linkem.py delivers the round trip and the bandwidth it is configured with, and
resets a connection at the byte offset asked for while later connections get through."""

from __future__ import annotations

import socket
import statistics
import threading
import time

import pytest
from _transport_support import LinkEmulator

RTT_S, MBIT = 0.020, 10.0


class Echo:
    """A TCP server on 127.0.0.1 that sends back whatever it reads, one thread per connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = self.server.getsockname()[:2]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                    if not data:
                        return
                    conn.sendall(data)
                except OSError:  # the relay reset the connection: that is what one test is about
                    return

    def close(self) -> None:
        self.server.close()


def read_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        if not chunk:
            raise ConnectionError("closed early")
        out += chunk
    return bytes(out)


def test_round_trip_of_small_messages_matches_the_configured_rtt():
    echo = Echo()
    with LinkEmulator(target=echo.address, delay_s=RTT_S / 2, bandwidth_bps=MBIT * 1e6) as link:
        sock = socket.create_connection(link.address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for i in range(25):
            message = i.to_bytes(4, "little") * 16  # 64 bytes
            began = time.perf_counter()
            sock.sendall(message)
            assert read_exactly(sock, len(message)) == message
            rtts.append(time.perf_counter() - began)
        sock.close()
    echo.close()
    median = statistics.median(rtts[1:])  # the first one also pays the emulated TCP handshake
    assert median == pytest.approx(RTT_S, rel=0.10), f"median RTT {median * 1e3:.2f} ms, configured {RTT_S * 1e3} ms"
    assert rtts[0] > 1.9 * RTT_S  # the first bytes of a connection wait one extra round trip, as after a SYN


def test_throughput_of_a_few_megabytes_matches_the_bandwidth_cap():
    size = 2_000_000
    sink = socket.create_server(("127.0.0.1", 0))
    arrivals: list[tuple[float, int]] = []

    def drain() -> None:
        conn, _ = sink.accept()
        got = 0
        while got < size:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += len(chunk)
            arrivals.append((time.perf_counter(), got))
        conn.close()

    reader = threading.Thread(target=drain)
    reader.start()
    with LinkEmulator(target=sink.getsockname()[:2], delay_s=RTT_S / 2, bandwidth_bps=MBIT * 1e6) as link:
        with socket.create_connection(link.address) as sock:
            sock.sendall(bytes(size))
            reader.join(timeout=10)
    sink.close()
    assert arrivals[-1][1] == size
    (t0, first), (t1, last) = arrivals[0], arrivals[-1]
    mbit = (last - first) * 8 / (t1 - t0) / 1e6
    assert mbit == pytest.approx(MBIT, rel=0.10), f"{mbit:.2f} Mbit/s through a {MBIT} Mbit/s link"


def test_reset_at_a_byte_offset_cuts_both_ends_and_the_next_connection_works():
    echo = Echo()
    with LinkEmulator(target=echo.address, resets=[("up", 1000)]) as link:
        sock = socket.create_connection(link.address)
        sock.sendall(bytes(range(256)) * 20)  # 5,120 bytes up: only the first 1,000 reach the server
        echoed = bytearray()
        with pytest.raises(ConnectionResetError):
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    raise AssertionError("a clean EOF, not a reset")
                echoed += chunk
        sock.close()
        assert len(echoed) <= 1000 and bytes(echoed) == (bytes(range(256)) * 4)[: len(echoed)]
        assert link.passed["up"] == 1000 and [(r.direction, r.offset) for r in link.resets_done] == [("up", 1000)]

        again = socket.create_connection(link.address)  # the relay keeps working after the reset
        again.sendall(b"still there?")
        assert read_exactly(again, 12) == b"still there?"
        again.close()
    echo.close()
