"""Mutual TLS connections: the record layer, the handshake and the hello.

Theory of operation. A connection is set up in three steps, all within ``handshake_timeout_s``:

1. TLS 1.3 only (minimum and maximum), both sides present their certificate. Each side's trust store holds
   exactly its pinned peer certificates (:class:`~vsplit.transport.pinning.Credentials`), with
   ``CERT_REQUIRED`` and no hostname check, so OpenSSL already refuses an unknown or expired certificate or a
   client without one. A first byte that is not a TLS handshake record is refused as a plaintext client.
2. The dialing party sends a *hello* naming itself and the party it wants; the listener answers ``ok`` or
   not. The hello carries party names only, inside the encrypted channel.
3. Both sides check that the peer's certificate is exactly the one pinned for the party it claims to be
   (:func:`~vsplit.transport.pinning.identify_peer`).

Every rejection raises :class:`~vsplit.errors.AuthenticationError` on the honest side with the reason
(unknown certificate, certificate pinned to another party, expired certificate, plaintext client, no
certificate); the rejected peer learns only a TLS alert or ``ok: false``.

TLS runs over memory buffers (:class:`ssl.SSLObject`): :class:`TlsLayer` is a sans-IO record layer and
:class:`~vsplit.transport.stream.StreamChannel` does the socket work, so reading and writing never touch one
OpenSSL object from two threads at once, and every byte on the wire is counted.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from typing import Any

from vsplit.errors import AuthenticationError, TransportError
from vsplit.transport.framing import Deframer, prefix
from vsplit.transport.pinning import Credentials, identify_peer
from vsplit.transport.stream import CHUNK, ChannelOptions, StreamChannel, open_frames

_TLS_HANDSHAKE_RECORD = 0x16
_HELLO_MAGIC = b"VSHELLO1"
_HELLO_MAX = 1024
_X509_V_ERR_CERT_NOT_YET_VALID = 9
_X509_V_ERR_CERT_HAS_EXPIRED = 10


class ClosedEarly(TransportError):
    """The peer closed (or reset) the connection before sending a single byte: a listener with no handshake slot
    free, or one that refuses this address; the dialer may try again (:func:`vsplit.transport.connect.dial`)."""


class TlsLayer:
    """TLS over memory buffers: the sans-IO record layer of a TLS channel (see the module docstring)."""

    closes_explicitly = True

    def __init__(self, context: ssl.SSLContext, *, server_side: bool) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=server_side)
        self.ended = False
        self._lock = threading.Lock()

    def seal(self, data: bytes | memoryview) -> bytes:
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[self.tls.write(view) :]
            return self.outgoing.read()

    def put(self, data: bytes | memoryview) -> None:
        with self._lock:
            self.incoming.write(data)

    def read_into(self, room: memoryview) -> int:
        got, size = 0, len(room)
        with self._lock:
            while got < size:  # a call opens one record at most: go on while records are complete
                try:
                    n = self.tls.read(size - got, room[got:])  # decrypts into the frame itself: no piece to copy
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    self.ended = True
                    break
                except ssl.SSLError as exc:
                    raise TransportError(f"TLS error: {exc.reason or exc}") from None
                if not n:
                    self.ended = True
                    break
                got += n
        return got

    def pending(self) -> bool:
        return self.outgoing.pending > 0

    def goodbye(self) -> bytes:
        with self._lock:
            try:
                self.tls.unwrap()
            except ssl.SSLError:
                pass  # we do not wait for the peer's close_notify
            return self.outgoing.read()


class TlsChannel(StreamChannel):
    """A mutually authenticated TLS channel to one pinned peer; see :func:`vsplit.transport.connect.open_channels`."""

    def __init__(
        self, sock: socket.socket, layer: TlsLayer, *, peer: str, peer_fingerprint: str, **kwargs: Any
    ) -> None:
        self.peer_fingerprint = peer_fingerprint
        super().__init__(sock, layer, peer=peer, **kwargs)


# -- one connection ----------------------------------------------------------------------------------------------


class _Link:
    """Blocking reads and writes over a socket and a :class:`TlsLayer` while a connection is being set up."""

    def __init__(self, sock: socket.socket, layer: TlsLayer, *, deadline: float, who: str, options: ChannelOptions,
                 first: bytes = b""):
        self.sock, self.layer, self.deadline, self.who = sock, layer, deadline, who
        self.deframer = Deframer(max_frame=options.max_frame)
        self.sent = self.received = 0
        self._first = first  # bytes the listener already read from the socket (the first TLS record)

    def flush(self) -> None:
        self._send(self.layer.outgoing.read())

    def _send(self, data: bytes) -> None:
        if not data:
            return
        self.sock.settimeout(self._remaining())
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise TransportError(f"{self.who} did not finish the TLS handshake and hello in time") from None
        except OSError as exc:
            kind = ClosedEarly if not self.received else TransportError
            raise kind(f"connection to {self.who} failed: {exc.strerror or exc}") from None
        self.sent += len(data)

    def read_raw(self) -> bytes:
        if self._first:
            data, self._first = self._first, b""
            self.received += len(data)
            return data
        self.sock.settimeout(self._remaining())
        try:
            data = self.sock.recv(CHUNK)
        except TimeoutError:
            raise TransportError(f"{self.who} did not finish the TLS handshake and hello in time") from None
        except OSError as exc:
            kind = ClosedEarly if not self.received else TransportError
            raise kind(f"connection to {self.who} failed: {exc.strerror or exc}") from None
        if not data:
            kind = ClosedEarly if not self.received else TransportError
            raise kind(f"{self.who} closed the connection during the TLS handshake or hello")
        self.received += len(data)
        return data

    def handshake(self, *, server_side: bool) -> bytes:
        """Run the TLS handshake; return the peer certificate (DER)."""
        first = True
        while True:
            try:
                self.layer.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError as exc:
                self._try_flush()  # tell the peer with a TLS alert
                raise AuthenticationError(_explain_verify_failure(exc, self.who)) from None
            except ssl.SSLError as exc:
                self._try_flush()
                raise _explain_tls_error(exc, self.who) from None
            self.flush()
            data = self.read_raw()
            if server_side and first and data[0] != _TLS_HANDSHAKE_RECORD:
                raise AuthenticationError(
                    f"{self.who} did not start a TLS handshake: a plaintext client or another protocol; "
                    "vsplit parties only accept mutual TLS"
                )
            first = False
            self.layer.incoming.write(data)
        self.flush()
        der = self.layer.tls.getpeercert(binary_form=True)
        if not der:
            raise AuthenticationError(f"{self.who} presented no certificate")
        return der

    def send_frame(self, payload: bytes) -> None:
        self._send(self.layer.seal(prefix(payload) + payload))

    def read_frames(self) -> list[bytearray]:
        data = b""  # the handshake may have left application data in the buffer already
        while True:
            try:
                frames = open_frames(self.layer, self.deframer, data)
            except TransportError as exc:
                if "ALERT" in str(exc).upper():  # TLS 1.3: the server judges our certificate after our handshake
                    raise AuthenticationError(_explain_alert(str(exc), self.who)) from None
                raise
            if frames:
                return frames
            if self.layer.ended:
                raise TransportError(f"{self.who} closed the connection during the hello")
            data = self.read_raw()

    def _try_flush(self) -> None:
        try:
            self.flush()
        except (OSError, TransportError):
            pass

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TransportError(f"{self.who} did not finish the TLS handshake and hello in time")
        return left


def _explain_verify_failure(exc: ssl.SSLCertVerificationError, who: str) -> str:
    if exc.verify_code == _X509_V_ERR_CERT_HAS_EXPIRED:
        return (
            f"{who} presented an expired certificate; its owner must run `vsplit keys new --party NAME --force` "
            "and send the new certificate and its fingerprint to its partners"
        )
    if exc.verify_code == _X509_V_ERR_CERT_NOT_YET_VALID:
        return f"{who} presented a certificate that is not valid yet; check both machines' clocks"
    return (
        f"{who} presented a certificate that is not pinned here (unknown certificate: {exc.verify_message}); "
        "if a partner made a new key, compare its fingerprint out of band and pin its new certificate"
    )


def _explain_tls_error(exc: ssl.SSLError, who: str) -> TransportError:
    reason = str(exc.reason or exc)
    upper = reason.upper()
    if "DID_NOT_RETURN_A_CERTIFICATE" in upper or "NO_CERTIFICATE" in upper:
        return AuthenticationError(f"{who} presented no certificate; every vsplit party must present its own")
    if "ALERT" in upper:
        return AuthenticationError(_explain_alert(reason, who))
    if any(word in upper for word in ("WRONG_VERSION_NUMBER", "HTTP", "UNSUPPORTED_PROTOCOL", "RECORD_LAYER")):
        return AuthenticationError(f"{who} does not speak TLS 1.3 ({reason}); vsplit parties only accept mutual TLS")
    return TransportError(f"TLS handshake with {who} failed: {reason}")


def _explain_alert(reason: str, who: str) -> str:
    """Why the peer ended the handshake, from the TLS alert it sent."""
    upper = reason.upper()
    if "CERTIFICATE_EXPIRED" in upper:
        return (
            f"{who} rejected this party's certificate as expired ({reason}); run `vsplit keys new --party NAME "
            "--force` and send the new certificate and its fingerprint to your partners"
        )
    if "CERTIFICATE_REQUIRED" in upper:
        return f"{who} requires a certificate and this party presented none ({reason})"
    if any(word in upper for word in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "DECRYPT_ERROR")):
        return (
            f"{who} rejected this party's certificate ({reason}): it does not pin this party's current "
            "certificate; send it the certificate file and compare fingerprints"
        )
    if "PROTOCOL_VERSION" in upper:
        return f"{who} refused TLS 1.3 ({reason}); both sides must run a vsplit with TLS 1.3"
    return f"{who} ended the TLS handshake with an alert ({reason})"


def hello(sender: str, recipient: str, *, ok: bool = True) -> bytes:
    """The hello payload: who is speaking and to whom (party names only).

    >>> parse_hello(hello("insurer", "bank"), who="peer")
    ('insurer', 'bank', True)
    """
    return _HELLO_MAGIC + json.dumps({"from": sender, "to": recipient, "ok": ok}, separators=(",", ":")).encode()


def parse_hello(payload: bytes | bytearray, *, who: str) -> tuple[str, str, bool]:
    """Return ``(sender, recipient, ok)`` from a hello, or raise :class:`AuthenticationError`."""
    bad = AuthenticationError(f"{who} did not send a valid vsplit hello; is it a vsplit party of the same version?")
    if len(payload) > _HELLO_MAX or not payload.startswith(_HELLO_MAGIC):
        raise bad
    try:
        body = json.loads(bytes(payload[len(_HELLO_MAGIC) :]))
    except (ValueError, RecursionError):
        raise bad from None
    if (
        not isinstance(body, dict)
        or set(body) != {"from", "to", "ok"}
        or not all(isinstance(body[k], str) for k in ("from", "to"))
        or not isinstance(body["ok"], bool)
    ):
        raise bad
    return body["from"], body["to"], body["ok"]


def accept_session(
    sock: socket.socket,
    credentials: Credentials,
    *,
    who: str,
    options: ChannelOptions,
    taken: frozenset[str] = frozenset(),
    first: bytes = b"",
) -> TlsChannel:
    """Server side of one connection: handshake, hello and pin checks; a channel to the authenticated partner.

    ``taken`` lists partners that are already connected; a second connection claiming one of them is refused.
    ``first``: bytes already read from ``sock`` (by :mod:`vsplit.transport.reception`), the start of the handshake.
    """
    layer = TlsLayer(credentials.context(server_side=True), server_side=True)
    link = _Link(sock, layer, deadline=time.monotonic() + options.handshake_timeout_s, who=who, options=options,
                 first=first)
    der = link.handshake(server_side=True)
    first, *early = link.read_frames()
    claimed, wanted, _ = parse_hello(first, who=who)
    try:
        if wanted != credentials.party:
            raise AuthenticationError(f"{who} wants party {wanted!r}, but this is {credentials.party!r}")
        if claimed not in credentials.pins:
            raise AuthenticationError(
                f"{who} claims to be {claimed!r}, which is not a configured partner {sorted(credentials.pins)}"
            )
        fp = identify_peer(der, pins=credentials.pins, claimed=claimed, who=who)
        if claimed in taken:
            raise AuthenticationError(f"{who} claims to be {claimed!r}, which is already connected")
    except AuthenticationError:
        try:
            link.send_frame(hello(credentials.party, claimed, ok=False))
            link._send(layer.goodbye())
        except (OSError, TransportError):
            pass
        raise
    link.send_frame(hello(credentials.party, claimed))
    return TlsChannel(
        sock, layer, peer=claimed, peer_fingerprint=fp, options=options, deframer=link.deframer,
        early_frames=early, wire_bytes=(link.sent, link.received),
    )


def connect_session(
    sock: socket.socket, credentials: Credentials, *, peer: str, who: str, options: ChannelOptions
) -> TlsChannel:
    """Client side of one connection to ``peer``: handshake, hello and pin checks; the authenticated channel."""
    layer = TlsLayer(credentials.context(server_side=False), server_side=False)
    link = _Link(sock, layer, deadline=time.monotonic() + options.handshake_timeout_s, who=who, options=options)
    der = link.handshake(server_side=False)
    fp = identify_peer(der, pins={peer: credentials.pins[peer]}, claimed=peer, who=who)
    try:
        link.send_frame(hello(credentials.party, peer))
    except TransportError as exc:
        try:
            link.read_frames()  # a TLS alert already waiting says why the peer hung up: raised as such
        except AuthenticationError:
            raise
        except TransportError:
            pass
        raise exc
    first, *early = link.read_frames()
    sender, recipient, ok = parse_hello(first, who=who)
    if sender != peer or recipient != credentials.party:
        raise AuthenticationError(f"{who} answered as {sender!r} to {recipient!r}; expected {peer!r}")
    if not ok:
        raise AuthenticationError(
            f"{who} refused this party {credentials.party!r} (the reason is in the log of {peer!r}); check that "
            f"{peer!r} pins this party's current certificate and that no other process is connected as this party"
        )
    return TlsChannel(
        sock, layer, peer=peer, peer_fingerprint=fp, options=options, deframer=link.deframer,
        early_frames=early, wire_bytes=(link.sent, link.received),
    )


__all__ = ["ClosedEarly", "TlsChannel", "TlsLayer", "accept_session", "connect_session", "hello", "parse_hello"]
