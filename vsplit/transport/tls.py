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

TLS runs on the socket itself (a non-blocking :class:`ssl.SSLSocket`): OpenSSL reads records from the socket and
writes them to it with no copy through memory buffers (a round trip of 128 KiB each way took about 0.08 ms more
over memory buffers, ``benchmarks/transport.py``). :class:`TlsLayer` holds one lock around every call into
OpenSSL and never waits while holding it, so reading and writing never touch the ``SSLSocket`` from two threads at
once. The channel's wire bytes are the kernel's counts (:mod:`vsplit.transport.tcpinfo`).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from vsplit.errors import AuthenticationError, TransportError
from vsplit.transport.framing import Deframer, prefix
from vsplit.transport.pinning import Credentials, identify_peer
from vsplit.transport.sockio import send_all, wait_writable
from vsplit.transport.stream import CHUNK, RECORD, ChannelOptions, StreamChannel
from vsplit.transport.tcpinfo import tcp_bytes

_TLS_HANDSHAKE_RECORD = 0x16
_HELLO_MAGIC = b"VSHELLO1"
_HELLO_MAX = 1024
_X509_V_ERR_CERT_NOT_YET_VALID = 9
_X509_V_ERR_CERT_HAS_EXPIRED = 10


class ClosedEarly(TransportError):
    """The peer closed (or reset) the connection before sending a single byte: a listener with no handshake slot
    free, or one that refuses this address; the dialer may try again (:func:`vsplit.transport.connect.dial`)."""


class TlsLayer:
    """TLS on the channel's non-blocking socket (see the module docstring): the record layer of a TLS channel.

    Every call into OpenSSL holds one lock and none waits while holding it: a write that finds the socket full
    returns, and the writer waits for room without the lock (:func:`~vsplit.transport.sockio.send_all`), so a
    reader in one thread and a writer in another never use the ``SSLSocket`` at once.
    """

    closes_explicitly = True

    def __init__(self, tls: ssl.SSLSocket) -> None:
        self.tls = tls
        self.ended = False
        self._lock = threading.Lock()
        self._closing = False
        self._unsure = False
        self._end: str | BaseException | None = None  # how the stream ended: "close_notify", "drop" or the error
        # ``SSLSocket.recv_into`` is two Python calls around the C object's ``read``: a frame takes one call per
        # 16 KiB record, so the C reader is taken directly where the ssl module has it (CPython 3.7 and later).
        sslobj = getattr(tls, "_sslobj", None)
        self._read: Callable[[int, memoryview], int] = (
            sslobj.read if sslobj is not None else lambda n, room: tls.recv_into(room, n))
        self._sent = self._received = 0  # plaintext bytes

    def write(self, data: bytes | memoryview, *, timeout: float) -> None:
        send_all(self._send, self.tls, data, timeout=timeout)
        self._sent += len(data)

    def _send(self, view: bytes | bytearray | memoryview) -> int | None:
        with self._lock:
            if self._closing:  # after close_notify nothing more may go out (and never in clear)
                raise BrokenPipeError("the channel said goodbye")
            try:
                return self.tls.send(view)  # all of it (no partial writes), or it raises
            except ssl.SSLWantWriteError:
                return 0
            except ssl.SSLWantReadError:
                return None
            except (ssl.SSLEOFError, ssl.SSLSyscallError) as exc:
                raise ConnectionResetError(str(exc)) from None
            except ssl.SSLError as exc:
                raise TransportError(f"TLS error: {getattr(exc, 'reason', None) or exc}") from None

    def read_into(self, room: memoryview) -> int | None:
        """Decrypt into ``room`` record after record (at most :data:`~vsplit.transport.stream.CHUNK` bytes, so a
        writer never waits long for the lock), until it is full or the socket has no whole record more; see
        :meth:`~vsplit.transport.stream.RecordLayer.read_into`."""
        got, size = 0, min(len(room), CHUNK)
        with self._lock:
            if self._closing:  # after our goodbye: drain the raw bytes (TLS is over on this side)
                try:
                    return socket.socket.recv_into(self.tls, room)
                except (BlockingIOError, InterruptedError):
                    return None
            if self._end is not None:  # how the stream ended, seen while handing over the bytes before it
                return self._finish()
            read = self._read
            while got < size:  # one record per call: go on while records are complete
                try:
                    n = read(size - got, room[got:size])  # decrypts into the frame itself: no piece to copy
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    break
                except ssl.SSLZeroReturnError:
                    self._end = "close_notify"
                except ssl.SSLEOFError:
                    self._end = "drop"  # EOF without close_notify (``ended`` stays False)
                except ssl.SSLSyscallError as exc:
                    self._end = ConnectionResetError(str(exc))
                except ssl.SSLError as exc:
                    self._end = TransportError(f"TLS error: {getattr(exc, 'reason', None) or exc}")
                else:
                    if n:
                        got += n
                        continue
                    self._end = "close_notify"  # ragged EOFs raise SSLEOFError (suppress_ragged_eofs=False)
                if got:
                    break  # the bytes first; the next call reports the end
                return self._finish()
            self._unsure = got == size  # stopped with room full: a record may be partly read
        self._received += got
        return got or None

    def _finish(self) -> int:
        """The stream's end, once every byte before it was handed over: 0, or the error (under the lock)."""
        if isinstance(self._end, BaseException):
            raise self._end
        self.ended = self._end == "close_notify"
        return 0

    def buffered(self) -> bool:
        if self._end is not None and not self._closing:  # the end of the stream waits to be reported
            return True
        if not self._unsure:  # the last read stopped because the socket had no whole record more
            return False
        with self._lock:
            return not self._closing and self.tls.pending() > 0

    def goodbye(self, *, timeout: float) -> None:
        """Send ``close_notify`` (waiting up to ``timeout`` s for room in a full socket), then half-close."""
        end = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._closing:
                    return
                try:
                    self.tls.unwrap()  # sends close_notify; we do not wait for the peer's
                    full = False
                except ssl.SSLWantWriteError:  # the alert waits in OpenSSL: send it once there is room
                    full = time.monotonic() < end
                except (ssl.SSLError, OSError, ValueError):
                    full = False  # sent, or the connection is gone: nothing more to say
                if not full:
                    self._closing = True
                    self.tls.shutdown(socket.SHUT_WR)
                    return
            wait_writable(self.tls, max(0.0, end - time.monotonic()))

    def counted(self) -> tuple[int, int]:
        return _on_wire(self._sent), _on_wire(self._received)


def _on_wire(plaintext: int) -> int:
    """About how many wire bytes ``plaintext`` bytes take in TLS 1.3 records (16 KiB each, 22 bytes added)."""
    return plaintext + 22 * -(-plaintext // RECORD)


class TlsChannel(StreamChannel):
    """A mutually authenticated TLS channel to one pinned peer; see :func:`vsplit.transport.connect.open_channels`."""

    def __init__(
        self, sock: ssl.SSLSocket, *, peer: str, peer_fingerprint: str, **kwargs: Any
    ) -> None:
        self.peer_fingerprint = peer_fingerprint
        super().__init__(sock, TlsLayer(sock), peer=peer, **kwargs)


# -- one connection ----------------------------------------------------------------------------------------------


class _Link:
    """Blocking reads and writes on an ``SSLSocket``, bounded by one deadline, while a connection is being set up."""

    def __init__(self, tls: ssl.SSLSocket, *, deadline: float, who: str, options: ChannelOptions) -> None:
        self.tls, self.deadline, self.who = tls, deadline, who
        self.deframer = Deframer(max_frame=options.max_frame)

    def _failed(self, exc: OSError) -> TransportError:
        """A connection that dropped or was refused during setup; :class:`ClosedEarly` if the peer sent nothing."""
        counts = tcp_bytes(self.tls)
        kind = ClosedEarly if counts is None or not counts[1] else TransportError
        return kind(f"connection to {self.who} failed during the TLS handshake or hello: {exc.strerror or exc}")

    def _late(self) -> TransportError:
        return TransportError(f"{self.who} did not finish the TLS handshake and hello in time")

    def handshake(self) -> bytes:
        """Run the TLS handshake; return the peer certificate (DER)."""
        self.tls.settimeout(self._remaining())
        try:
            self.tls.do_handshake()  # one deadline for the whole handshake (the socket's timeout)
        except TimeoutError:
            raise self._late() from None
        except ssl.SSLCertVerificationError as exc:  # OpenSSL has sent the peer a TLS alert
            raise AuthenticationError(_explain_verify_failure(exc, self.who)) from None
        except (ssl.SSLEOFError, ssl.SSLSyscallError, ssl.SSLZeroReturnError) as exc:
            raise self._failed(exc) from None
        except ssl.SSLError as exc:
            raise _explain_tls_error(exc, self.who) from None
        except OSError as exc:
            raise self._failed(exc) from None
        der = self.tls.getpeercert(binary_form=True)
        if not der:
            raise AuthenticationError(f"{self.who} presented no certificate")
        return der

    def send_frame(self, payload: bytes) -> None:
        self.tls.settimeout(self._remaining())
        try:
            self.tls.sendall(prefix(payload) + payload)
        except TimeoutError:
            raise self._late() from None
        except ssl.SSLError as exc:
            if isinstance(exc, (ssl.SSLEOFError, ssl.SSLSyscallError)):
                raise self._failed(exc) from None
            raise TransportError(f"TLS error with {self.who}: {exc.reason or exc}") from None
        except OSError as exc:
            raise self._failed(exc) from None

    def read_frame(self) -> bytearray:
        """The next frame (the hello); reads no byte beyond it, so what follows stays for the channel."""
        while True:
            self.tls.settimeout(self._remaining())
            try:
                n = self.tls.recv_into(self.deframer.space())
            except TimeoutError:
                raise self._late() from None
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
                n = 0
            except ssl.SSLError as exc:
                if "ALERT" in str(exc.reason or exc).upper():  # TLS 1.3: the server judges our certificate late
                    raise AuthenticationError(_explain_alert(str(exc.reason or exc), self.who)) from None
                raise TransportError(f"TLS error with {self.who}: {exc.reason or exc}") from None
            except OSError as exc:
                raise self._failed(exc) from None
            if not n:
                raise TransportError(f"{self.who} closed the connection during the hello")
            frame = self.deframer.commit(n)
            if frame is not None:
                return frame

    def say_goodbye(self) -> None:
        """Best effort: send close_notify without waiting for the peer's."""
        try:
            self.tls.setblocking(False)  # send ours, do not wait for the peer's
            self.tls.unwrap()
        except (OSError, ValueError):
            pass

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._late()
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


def _wrap(sock: socket.socket, credentials: Credentials, *, server_side: bool) -> ssl.SSLSocket:
    """TLS on ``sock`` itself (it is detached: use the returned socket), handshake not yet run."""
    return credentials.context(server_side=server_side).wrap_socket(
        sock, server_side=server_side, do_handshake_on_connect=False, suppress_ragged_eofs=False
    )


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
    ``first``: the start of what the client sent, seen without taking it off the socket (``MSG_PEEK``, by
    :mod:`vsplit.transport.reception`); when empty, the first byte is peeked here.
    """
    deadline = time.monotonic() + options.handshake_timeout_s
    if not first:
        first = _peek_first(sock, who=who, deadline=deadline)
    if first[0] != _TLS_HANDSHAKE_RECORD:
        raise AuthenticationError(
            f"{who} did not start a TLS handshake: a plaintext client or another protocol; "
            "vsplit parties only accept mutual TLS"
        )
    tls = _wrap(sock, credentials, server_side=True)
    try:
        link = _Link(tls, deadline=deadline, who=who, options=options)
        der = link.handshake()
        claimed, wanted, _ = parse_hello(link.read_frame(), who=who)
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
                link.say_goodbye()
            except (OSError, TransportError):
                pass
            raise
        link.send_frame(hello(credentials.party, claimed))
        return TlsChannel(tls, peer=claimed, peer_fingerprint=fp, options=options, deframer=link.deframer)
    except BaseException:
        tls.close()
        raise


def _peek_first(sock: socket.socket, *, who: str, deadline: float) -> bytes:
    """The first byte the client sent, left on the socket for the handshake."""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        first = sock.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        raise TransportError(f"{who} did not start the TLS handshake in time") from None
    except OSError as exc:
        raise ClosedEarly(f"connection from {who} failed: {exc.strerror or exc}") from None
    if not first:
        raise ClosedEarly(f"{who} closed the connection before the TLS handshake")
    return first


def connect_session(
    sock: socket.socket, credentials: Credentials, *, peer: str, who: str, options: ChannelOptions
) -> TlsChannel:
    """Client side of one connection to ``peer``: handshake, hello and pin checks; the authenticated channel."""
    tls = _wrap(sock, credentials, server_side=False)
    try:
        link = _Link(tls, deadline=time.monotonic() + options.handshake_timeout_s, who=who, options=options)
        der = link.handshake()
        fp = identify_peer(der, pins={peer: credentials.pins[peer]}, claimed=peer, who=who)
        try:
            link.send_frame(hello(credentials.party, peer))
        except TransportError as exc:
            try:
                link.read_frame()  # a TLS alert already waiting says why the peer hung up: raised as such
            except AuthenticationError:
                raise
            except TransportError:
                pass
            raise exc
        sender, recipient, ok = parse_hello(link.read_frame(), who=who)
        if sender != peer or recipient != credentials.party:
            raise AuthenticationError(f"{who} answered as {sender!r} to {recipient!r}; expected {peer!r}")
        if not ok:
            raise AuthenticationError(
                f"{who} refused this party {credentials.party!r} (the reason is in the log of {peer!r}); check that "
                f"{peer!r} pins this party's current certificate and that no other process is connected as this party"
            )
        return TlsChannel(tls, peer=peer, peer_fingerprint=fp, options=options, deframer=link.deframer)
    except BaseException:
        tls.close()
        raise


__all__ = ["ClosedEarly", "TlsChannel", "TlsLayer", "accept_session", "connect_session", "hello", "parse_hello"]
