"""Helpers shared by the transport tests: identities, fast channel options, a raw TLS client, a TCP tap, and the
link emulator of ``benchmarks/linkem.py``."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import sys
from collections.abc import Iterable
from pathlib import Path

from vsplit.transport.framing import Deframer, prefix
from vsplit.transport.identity import IdentityFiles, create_identity, write_identity
from vsplit.transport.pinning import Credentials
from vsplit.transport.stream import ChannelOptions
from vsplit.transport.tls import hello, parse_hello

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from linkem import LinkEmulator  # benchmarks/ is not a package: the link emulator is shared from there

#: Short timers so dead peers and heartbeats show within a second.
FAST = ChannelOptions(heartbeat_s=0.1, idle_timeout_s=2.0, handshake_timeout_s=5.0, linger_s=0.2)


def make_identities(out: Path, names: Iterable[str], **kwargs) -> dict[str, IdentityFiles]:
    """Create and write one identity per party name into ``out``."""
    return {name: write_identity(create_identity(name, **kwargs), out, force=True) for name in names}


def short_lived_identity(out: Path, name: str, *, seconds: float) -> IdentityFiles:
    """An identity whose certificate expires ``seconds`` from now."""
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)
    days = (60 + seconds) / 86400
    return write_identity(create_identity(name, days=days, not_before=start), out, force=True)


def credentials(me: str, ids: dict[str, IdentityFiles], peers: Iterable[str]) -> Credentials:
    own = ids[me]
    return Credentials.load(
        me, own_cert=own.cert_path, own_key=own.key_path, peers={p: ids[p].cert_path for p in peers}
    )


class RawTlsClient:
    """An independent TLS 1.3 client built on :mod:`ssl` sockets: the attacker or odd peer in tests."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        cert: Path | None,
        key: Path | None,
        trust: Path,
        claim: str | None = None,
        hub: str = "bank",
    ) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        ctx.load_verify_locations(cafile=str(trust))
        if cert is not None:
            ctx.load_cert_chain(cert, key)
        raw = socket.create_connection(address, timeout=5)
        self.sock = ctx.wrap_socket(raw)
        self.deframer = Deframer()
        self.pending: list[bytearray] = []
        if claim is not None:
            try:
                self.send_frame(hello(claim, hub))
            except (ssl.SSLError, OSError):  # the hub refused the handshake and closed already (read_frame: None)
                pass

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(prefix(payload) + payload)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self, timeout: float = 5.0) -> bytearray | None:
        """The next frame, or None once the connection ends."""
        self.sock.settimeout(timeout)
        while not self.pending:
            try:
                data = self.sock.recv(65536)
            except (ssl.SSLError, OSError):
                return None
            if not data:
                return None
            self.pending.extend(self.deframer.feed(data))
        return self.pending.pop(0)

    def read_hello(self) -> tuple[str, str, bool]:
        frame = self.read_frame()
        assert frame is not None, "the hub closed the connection before its hello"
        return parse_hello(frame, who="hub")

    def close(self) -> None:
        self.sock.close()


class TcpTap(LinkEmulator):
    """A TCP proxy on localhost that forwards to ``upstream`` and records both directions: the link emulator of
    ``benchmarks/linkem.py`` with no delay, no bandwidth cap and recording on."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(target=upstream, record=True)

    @property
    def client_to_server(self) -> bytearray:
        assert self.recorded is not None
        return self.recorded["up"]

    @property
    def server_to_client(self) -> bytearray:
        assert self.recorded is not None
        return self.recorded["down"]

    def captured(self) -> bytes:
        with self._lock:
            return bytes(self.client_to_server) + bytes(self.server_to_client)
