"""Open the mutual-TLS channels of one party: the label party listens, its partners dial.

Why the label party listens. In vertical split learning the label party is the hub: it holds the labels and the
top model, and every partner exchanges messages with it and with nobody else. Letting the hub listen means one
inbound port to open, on one machine, at the one organization that runs the session; the partners (often
banks or insurers with strict firewalls) only need an outbound connection, which their networks usually allow.

Both sides are bounded by a deadline. A dialer retries with exponential backoff while the hub is not up yet
(connection refused, unreachable) or closes the connection before sending a byte (no handshake slot free:
:mod:`vsplit.transport.admission`), but gives up at once when authentication fails: retrying cannot fix a wrong
certificate. The listener accepts connections until every configured partner is connected; a rejected
connection (wrong certificate, plaintext, silent, ...) is logged, at a bounded rate, and does not stop the
listener, so a stranger cannot break a session by connecting first, nor keep a partner out by connecting often.

Example (two parties in one process, on an ephemeral port):
    >>> import tempfile, threading
    >>> from pathlib import Path
    >>> from vsplit.transport.identity import create_identity, write_identity
    >>> out = Path(tempfile.mkdtemp())
    >>> bank, insurer = (write_identity(create_identity(p), out) for p in ("bank", "insurer"))
    >>> hub = Listener(Credentials.load("bank", own_cert=bank.cert_path, own_key=bank.key_path,
    ...                                 peers={"insurer": insurer.cert_path}), address=("127.0.0.1", 0))
    >>> accepted = {}
    >>> thread = threading.Thread(target=lambda: accepted.update(hub.accept_all(deadline_s=10)))
    >>> thread.start()
    >>> partner = open_channels("insurer", role="dial", address=hub.address, own_cert=insurer.cert_path,
    ...                         own_key=insurer.key_path, peers={"bank": bank.cert_path}, deadline_s=10)
    >>> thread.join()
    >>> partner["bank"].send(b"hello bank")
    >>> bytes(accepted["insurer"].recv(timeout=5))
    b'hello bank'
    >>> for channel in (*partner.values(), *accepted.values()):
    ...     channel.close()
"""

from __future__ import annotations

import collections
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from vsplit.errors import AuthenticationError, ConfigError, ProtocolError, TransportError
from vsplit.transport.admission import AdmissionPolicy, Gate
from vsplit.transport.pinning import Credentials
from vsplit.transport.reception import Reception, show
from vsplit.transport.refusals import RefusalLog
from vsplit.transport.stream import ChannelOptions
from vsplit.transport.tls import ClosedEarly, TlsChannel, accept_session, connect_session

log = logging.getLogger(__name__)

#: Default time to wait until every peer is connected.
DEFAULT_DEADLINE_S = 120.0
_BACKOFF_START_S, _BACKOFF_MAX_S = 0.05, 2.0
#: TCP connections the kernel queues until the accept loop takes them (it takes them at once)
_BACKLOG = 128


def open_channels(
    me: str,
    *,
    role: Literal["listen", "dial"],
    address: tuple[str, int],
    own_cert: str | Path,
    own_key: str | Path,
    peers: Mapping[str, str | Path],
    deadline_s: float = DEFAULT_DEADLINE_S,
    options: ChannelOptions | None = None,
    admission: AdmissionPolicy | None = None,
) -> dict[str, TlsChannel]:
    """Connect party ``me`` to its ``peers`` (party name -> pinned certificate) over mutual TLS.

    ``role="listen"`` (the label party) binds ``address`` and waits until every peer has connected;
    ``role="dial"`` (a partner) connects to the one peer in ``peers`` at ``address``, retrying until
    ``deadline_s``. Returns one authenticated channel per peer name. ``admission``: the listener's limits before
    the handshake (:mod:`vsplit.transport.admission`).
    """
    credentials = Credentials.load(me, own_cert=own_cert, own_key=own_key, peers=peers)
    options = options if options is not None else ChannelOptions()
    if role == "listen":
        with Listener(credentials, address=address, options=options, admission=admission) as listener:
            return listener.accept_all(deadline_s=deadline_s)
    if role == "dial":
        hub = the_hub(credentials)
        return {hub: dial(credentials, peer=hub, address=address, deadline_s=deadline_s, options=options)}
    raise ConfigError(f"{me}: role must be 'listen' or 'dial', got {role!r}")


def the_hub(credentials: Credentials) -> str:
    """The one peer a dialing party connects to (the hub), or a :class:`ConfigError` if it pins another number."""
    if len(credentials.pins) != 1:
        raise ConfigError(f"{credentials.party}: a dialing party connects to exactly one peer (the label party), got "
                          f"{sorted(credentials.pins)}")
    (hub,) = credentials.pins
    return hub


def dial(
    credentials: Credentials,
    *,
    peer: str,
    address: tuple[str, int],
    deadline_s: float = DEFAULT_DEADLINE_S,
    options: ChannelOptions | None = None,
) -> TlsChannel:
    """Connect to ``peer`` at ``address``, retrying with backoff until ``deadline_s`` while it is not up."""
    options = options if options is not None else ChannelOptions()
    if peer not in credentials.pins:
        raise ConfigError(f"{credentials.party}: no certificate pinned for {peer!r}")
    who = f"{peer!r} at {_show(address)}"
    deadline = time.monotonic() + deadline_s
    pause = _BACKOFF_START_S
    while True:
        left = deadline - time.monotonic()
        try:
            sock = socket.create_connection(address, timeout=max(0.01, min(left, options.handshake_timeout_s)))
        except OSError as exc:
            if left <= pause:
                raise TransportError(
                    f"{credentials.party}: could not reach {who} within {deadline_s} s ({exc.strerror or exc}); "
                    "is it running? check the address, the port and the firewalls"
                ) from None
            log.info("%s: %s not reachable yet (%s); retrying in %.2f s", credentials.party, who, exc, pause)
            pause = _back_off(pause)
            continue
        _tune(sock)
        try:
            return connect_session(sock, credentials, peer=peer, who=who, options=options)
        except ClosedEarly as exc:  # no handshake slot free at the listener (a flood?), or it refuses this address
            sock.close()
            if deadline - time.monotonic() <= pause:
                raise TransportError(
                    f"{credentials.party}: {who} kept closing the connection before the TLS handshake for "
                    f"{deadline_s} s ({exc}); it may be busy with other connections, or refuse this party's address "
                    "(its network.allow_from)"
                ) from None
            log.info("%s: %s closed the connection before the handshake; retrying in %.2f s", credentials.party,
                     who, pause)
            pause = _back_off(pause)
        except BaseException:
            sock.close()
            raise


def _back_off(pause: float) -> float:
    """Sleep about ``pause`` seconds (jittered: partners do not retry in lockstep); the next, doubled pause."""
    time.sleep(pause * random.uniform(0.8, 1.2))
    return min(pause * 2, _BACKOFF_MAX_S)


class Listener:
    """The label party's listening socket; :meth:`accept_all` returns a channel per configured partner.

    The label party listens because it is the hub every partner talks to: one inbound port at the organization
    that runs the session, and only outbound connections for the partners (see the module docstring).
    Use it directly (instead of :func:`open_channels`) to learn the bound port when ``address`` has port 0.
    :meth:`accept_all` admits connections as :mod:`vsplit.transport.admission` says (``admission``) and runs each
    handshake in its own thread (:mod:`vsplit.transport.reception`), so neither idle nor stalling strangers delay a
    partner; refusals are logged at a bounded rate (:mod:`vsplit.transport.refusals`).
    """

    def __init__(
        self, credentials: Credentials, *, address: tuple[str, int], options: ChannelOptions | None = None,
        admission: AdmissionPolicy | None = None,
    ) -> None:
        self.credentials = credentials
        self.options = options if options is not None else ChannelOptions()
        self.gate = Gate(admission)
        #: Every refused connection, counted and logged at a bounded rate.
        self.refusals = RefusalLog(credentials.party)
        self._stop = threading.Event()
        self._reception: Reception | None = None
        self._reception_thread: threading.Thread | None = None
        try:
            self._sock = socket.create_server(address, backlog=_BACKLOG)
        except OSError as exc:
            raise TransportError(
                f"{credentials.party}: cannot listen on {_show(address)} ({exc.strerror or exc}); "
                "is another process using the port?"
            ) from None
        self.address: tuple[str, int] = self._sock.getsockname()[:2]

    @property
    def rejections(self) -> collections.deque[TransportError]:
        """Why the most recent refused connections were refused, oldest first (at most the last 100)."""
        return self.refusals.recent

    def accept_one(self, *, timeout_s: float, taken: frozenset[str] = frozenset()) -> TlsChannel:
        """Accept and authenticate one connection; raise :class:`AuthenticationError` saying why if refused."""
        conn, addr = self.accept_socket(timeout_s=timeout_s)
        return self.authenticate(conn, addr, taken=taken)

    def accept_socket(self, *, timeout_s: float) -> tuple[socket.socket, tuple]:
        """Accept one TCP connection, not yet authenticated (see :meth:`authenticate`)."""
        self._sock.settimeout(max(timeout_s, 0.001))
        try:
            conn, addr = self._sock.accept()
        except TimeoutError:
            raise TransportError(f"{self.credentials.party}: no connection within {timeout_s:.1f} s") from None
        return conn, addr

    def authenticate(self, conn: socket.socket, addr: tuple, *, taken: frozenset[str] = frozenset(),
                     first: bytes = b"") -> TlsChannel:
        """Run the TLS handshake, hello and pin checks on an accepted connection (``first``: the bytes already read
        from it); close it if refused."""
        try:
            _tune(conn)
            return accept_session(conn, self.credentials, who=f"connection from {_show(addr)}", options=self.options,
                                  taken=taken, first=first)
        except BaseException:
            conn.close()
            raise

    def refused(self, addr: tuple, exc: TransportError) -> None:
        """Record a connection refused during or after its handshake (logged at a bounded rate)."""
        self.refusals.record(str(addr[0]), exc)

    def accept_all(self, *, deadline_s: float = DEFAULT_DEADLINE_S) -> dict[str, TlsChannel]:
        """Accept connections until every pinned partner is connected; refused ones are logged and skipped."""
        deadline = time.monotonic() + deadline_s
        channels: dict[str, TlsChannel] = {}
        wanted = set(self.credentials.pins)
        cond = threading.Condition()

        def welcome(conn: socket.socket, addr: tuple, first: bytes) -> None:
            with cond:
                taken = frozenset(channels)
            try:
                channel = self.authenticate(conn, addr, taken=taken, first=first)
            except TransportError as exc:
                if not self._stop.is_set():
                    self.refused(addr, exc)
                return
            except (ProtocolError, OSError) as exc:  # whatever one connection does, the listener goes on
                if not self._stop.is_set():
                    self.refused(addr, TransportError(f"connection from {_show(addr)} failed: {exc}"))
                return
            with cond:
                late = self._stop.is_set() or channel.peer in channels
                if not late:
                    channels[channel.peer] = channel
                    self.gate.trust(str(addr[0]))
                    cond.notify_all()
            if late:
                channel.close()
                return
            log.info("%s: %s connected (%s)", self.credentials.party, channel.peer, channel.peer_fingerprint)

        self.start_reception(welcome)
        try:
            with cond:
                while set(channels) != wanted and time.monotonic() < deadline:
                    cond.wait(min(0.25, max(0.0, deadline - time.monotonic())))
                self._stop.set()
                done = set(channels) == wanted
            if not done:
                raise self._timed_out(sorted(wanted - set(channels)), deadline_s)
        except BaseException:
            with cond:
                self._stop.set()
                for channel in channels.values():
                    channel.close()
            raise
        finally:
            self.close()
        return channels

    def start_reception(self, handshake: Callable[[socket.socket, tuple, bytes], None]) -> None:
        """Run the accept loop (:class:`~vsplit.transport.reception.Reception`) on a background thread until
        :meth:`close`; ``handshake(conn, addr, first)`` handles each admitted connection in a thread of its own."""
        self._reception = Reception(self._sock, gate=self.gate, refusals=self.refusals, handshake=handshake,
                                    name=f"vsplit-listen-{self.credentials.party}")
        self._reception_thread = threading.Thread(target=self._reception.run, args=(self._stop,),
                                                  name=f"vsplit-listen-{self.credentials.party}", daemon=True)
        self._reception_thread.start()

    def _timed_out(self, missing: list[str], deadline_s: float) -> TransportError:
        text = f"{self.credentials.party}: partners {missing} did not connect within {deadline_s} s"
        if not self.refusals.total:
            return TransportError(text + "; are they running, and is this port reachable from their networks?")
        last = self.rejections[-1]
        refused_auth = any(isinstance(r, AuthenticationError) for r in self.rejections)
        kind = AuthenticationError if refused_auth else TransportError
        return kind(f"{text}; refused {self.refusals.total} connection(s), the last because: {last}")

    def close(self) -> None:
        """Stop listening (channels already accepted stay open)."""
        self._stop.set()
        thread = self._reception_thread
        if self._reception is not None:
            self._reception.wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2)
        self._sock.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # frames are sent whole; do not wait for more


_show = show


__all__ = ["DEFAULT_DEADLINE_S", "Listener", "dial", "open_channels"]
