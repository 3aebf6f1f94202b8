"""TLS on the socket itself (issue 28): the listener only peeks at a client's first record, so a ClientHello that
arrives in pieces still leads to a handshake; the kernel's byte counts are exact; a drop without close_notify still
differs from a clean close."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from _transport_support import FAST, credentials, make_identities

from vsplit.errors import TransportError
from vsplit.transport.channel import PeerClosed, PeerLost
from vsplit.transport.connect import Listener, dial
from vsplit.transport.tcpinfo import tcp_bytes
from vsplit.transport.tls import TlsLayer


@pytest.fixture
def ids(tmp_path):
    return make_identities(tmp_path, ["bank", "insurer"])


class SlowStart:
    """A TCP relay that forwards the dialer's first ``head`` bytes, waits ``pause_s``, then relays both ways."""

    def __init__(self, target: tuple[str, int], *, head: int, pause_s: float) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = self._server.getsockname()[:2]
        self._target, self._head, self._pause = target, head, pause_s
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        client, _ = self._server.accept()
        upstream = socket.create_connection(self._target)
        self._sockets += [client, upstream]
        first = b""
        while len(first) < self._head + 1:
            first += client.recv(65536)
        upstream.sendall(first[: self._head])
        time.sleep(self._pause)
        upstream.sendall(first[self._head :])
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        self._pipe(client, upstream)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        for sock in (*self._sockets, self._server):
            sock.close()


def test_a_client_hello_in_two_pieces_still_connects(ids):
    """The reception peeks at the first record without taking it; an incomplete one rests and is looked at again."""
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST)
    relay = SlowStart(hub.address, head=3, pause_s=0.2)  # the record header itself is cut
    with ThreadPoolExecutor(max_workers=1) as pool:
        accepted = pool.submit(hub.accept_all, deadline_s=10)
        partner = dial(credentials("insurer", ids, ["bank"]), peer="bank", address=relay.address, deadline_s=10,
                       options=FAST)
        bank = accepted.result(timeout=10)["insurer"]
    partner.send(b"after a slow hello")
    assert bytes(bank.recv(timeout=5)) == b"after a slow hello"
    assert not hub.refusals.total
    partner.close()
    bank.close()
    relay.close()


def test_the_kernel_counts_what_crossed_a_tcp_connection():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname()[:2])
    accepted, _ = server.accept()
    if tcp_bytes(client) is None:
        pytest.skip("this operating system does not report TCP byte counts (Linux 4.19 and later do)")
    client.sendall(b"x" * 12_345)
    got = 0
    while got < 12_345:
        got += len(accepted.recv(65536))
    accepted.sendall(b"y" * 77)
    assert client.recv(100) == b"y" * 77
    assert tcp_bytes(client) == (12_345, 77)
    assert tcp_bytes(accepted) == (77, 12_345)
    for sock in (client, accepted, server):
        sock.close()
    assert tcp_bytes(client) is None  # closed: nothing to ask


class _Reported:
    """A TCP socket whose kernel reports the given ``struct tcp_info`` counters (offsets as Linux lays them out)."""

    family = socket.AF_INET

    def __init__(self, sent: int, retransmitted: int, received: int) -> None:
        self.info = bytearray(232)
        struct.pack_into("=Q", self.info, 128, received)
        struct.pack_into("=QQ", self.info, 200, sent, retransmitted)

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        return bytes(self.info[:size])


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="no TCP_INFO on this operating system")
def test_retransmitted_segments_are_not_counted_as_sent():
    # a loaded machine's loopback may send a segment twice: one run's traffic must not differ from the next
    assert tcp_bytes(_Reported(sent=1_105_224, retransmitted=56_648, received=9)) == (1_048_576, 9)


def tls_pair(ids):
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST)
    with ThreadPoolExecutor(max_workers=1) as pool:
        accepted = pool.submit(hub.accept_all, deadline_s=10)
        partner = dial(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address, deadline_s=10,
                       options=FAST)
        return accepted.result(timeout=10)["insurer"], partner


def test_a_clean_close_and_a_drop_still_differ(ids):
    bank, partner = tls_pair(ids)
    partner.send(b"last words")
    partner.close()  # close_notify
    assert bytes(bank.recv(timeout=5)) == b"last words"
    with pytest.raises(PeerClosed):
        bank.recv(timeout=5)
    bank.close()

    bank, partner = tls_pair(ids)
    partner.send(b"then gone")
    time.sleep(0.1)
    partner._sock.shutdown(socket.SHUT_RDWR)  # the process died: FIN without close_notify
    assert bytes(bank.recv(timeout=5)) == b"then gone"
    with pytest.raises(PeerLost, match="without a TLS close"):
        bank.recv(timeout=5)
    bank.close()
    partner.close()


def test_frames_larger_than_the_socket_buffers_cross_both_ways_at_once(ids):
    """Both sides write 8 MiB while the other writes too: non-blocking writes wait for room without the lock, so
    each side's reader keeps draining and neither write stalls."""
    bank, partner = tls_pair(ids)
    big = bytes(range(256)) * (32 * 1024)
    with ThreadPoolExecutor(max_workers=2) as pool:
        sends = [pool.submit(partner.send, big), pool.submit(bank.send, big[::-1])]
        assert bytes(bank.recv(timeout=20)) == big
        assert bytes(partner.recv(timeout=20)) == big[::-1]
        for done in sends:
            done.result(timeout=20)
    stats = partner.wire_stats
    assert len(big) < stats.wire_bytes_sent < len(big) * 1.01 + 8192
    bank.close()
    partner.close()


def test_close_notify_waits_for_room_in_a_full_socket():
    """A goodbye that finds the socket full (OpenSSL keeps the alert: SSLWantWriteError) sends it once there is
    room, then half-closes; nothing is written after it."""
    a, b = socket.socketpair()

    class FullOnce:  # the SSLSocket's part TlsLayer uses, with a full socket at the first close_notify
        def __init__(self) -> None:
            self.calls: list[str] = []

        def fileno(self) -> int:
            return a.fileno()

        def unwrap(self) -> None:
            self.calls.append("unwrap")
            if len(self.calls) == 1:
                raise ssl.SSLWantWriteError("the socket is full")

        def shutdown(self, how: int) -> None:
            self.calls.append("shutdown")

        def send(self, data) -> int:
            raise AssertionError("written after the goodbye")

    fake = FullOnce()
    layer = TlsLayer(fake)  # type: ignore[arg-type]
    layer.goodbye(timeout=1.0)
    assert fake.calls == ["unwrap", "unwrap", "shutdown"]
    with pytest.raises(BrokenPipeError):
        layer.write(b"late", timeout=1.0)
    a.close()
    b.close()


def test_close_right_after_a_frame_the_peer_has_not_read_still_ends_cleanly(ids):
    """A reader that is slow to read an 8 MiB frame sent just before its peer closed gets the frame and then a clean
    close, not a drop."""
    bank, partner = tls_pair(ids)
    big = bytes(range(256)) * (32 * 1024)  # 8 MiB: more than the socket buffers hold
    closing = threading.Thread(target=lambda: (bank.send(big), bank.close()))
    closing.start()
    time.sleep(0.3)
    assert bytes(partner.recv(timeout=10)) == big
    with pytest.raises(PeerClosed):
        partner.recv(timeout=10)
    closing.join(timeout=10)
    partner.close()


def test_a_stalled_partial_record_is_looked_at_a_few_times_not_every_few_milliseconds(ids, monkeypatch):
    """Peeking leaves the bytes on the socket, so it stays readable: the rest between looks doubles (5 ms up to
    0.25 s), and a stranger that sends three bytes and stalls for a second costs about ten looks, not two hundred."""
    from vsplit.transport.reception import Reception

    looks = []
    original = Reception._first_bytes

    def counted(self, selector, conn):
        looks.append(time.monotonic())
        return original(self, selector, conn)

    monkeypatch.setattr(Reception, "_first_bytes", counted)
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST)
    with ThreadPoolExecutor(max_workers=1) as pool:
        waiting = pool.submit(hub.accept_all, deadline_s=1.2)
        stranger = socket.create_connection(hub.address)
        stranger.sendall(b"\x16\x03\x01")  # the start of a TLS record, and no more
        with pytest.raises(Exception, match="did not connect"):
            waiting.result(timeout=10)
    stranger.close()
    assert 3 <= len(looks) <= 20, len(looks)


@pytest.mark.parametrize(("end", "ended", "raises"), [
    (ssl.SSLZeroReturnError, True, None),
    (ssl.SSLEOFError, False, None),
    (ssl.SSLError, False, "TLS error"),
])
def test_the_end_of_a_stream_is_reported_after_the_bytes_before_it(end, ended, raises):
    """A read that meets the end (close_notify, a drop, a TLS error) after some records hands those over first and
    reports the end, as it was, at the next read."""

    class Records:  # the C object's read: one record, then the end
        def __init__(self) -> None:
            self.left = [b"abc"]

        def read(self, n: int, room: memoryview) -> int:
            if self.left:
                data = self.left.pop()
                room[: len(data)] = data
                return len(data)
            raise end("the end")

    class Sock:
        _sslobj = Records()

    layer = TlsLayer(Sock())  # type: ignore[arg-type]
    room = memoryview(bytearray(10))
    assert layer.read_into(room) == 3 and bytes(room[:3]) == b"abc"
    assert layer.buffered()  # the end waits to be reported: a reader must not wait for the socket
    if raises:
        with pytest.raises(TransportError, match=raises):
            layer.read_into(room)
    else:
        assert layer.read_into(room) == 0
        assert layer.ended is ended
