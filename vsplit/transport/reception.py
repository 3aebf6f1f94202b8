"""The accept loop of a listener: TCP connections wait for their first TLS record, then get a handshake thread.

Theory of operation. One thread (:meth:`Reception.run`) owns the listening socket and a selector. It accepts every
connection at once (so the kernel's backlog never fills and an honest party's connection is never dropped by it),
closes the ones :meth:`~vsplit.transport.admission.Gate.allowed` refuses, and parks the others in a bounded
waiting room, oldest first. A parked connection costs a file descriptor and the bytes the kernel holds for it
(the loop looks at them with ``MSG_PEEK`` and takes nothing off the socket, since TLS runs on the socket itself).
Once its whole first TLS record has arrived (the ClientHello: a 5-byte header and the length it declares, at most
:data:`MAX_RECORD`; or a first byte that is not a TLS handshake record, which the handshake then refuses as
plaintext) it takes a handshake slot (:meth:`~vsplit.transport.admission.Gate.enter`) and
``handshake(conn, addr, first)`` runs in a thread of its own with the bytes seen so far, and gives the slot back
when it returns. While a record is incomplete the connection rests before the loop looks again (its bytes keep the
socket readable, so looking at once would spin): :data:`_REST_S` at first, twice as long after each look that
finds it still incomplete (up to :data:`_REST_MAX_S`), so a stranger that stalls costs a few looks, not one every
few milliseconds. So a stranger that sends part of a record and stalls holds no slot either. A connection whose
first record is not complete after ``first_record_s``, one that closes before, one with no slot free, and the
oldest one when the waiting room is full are closed and recorded in the :class:`~vsplit.transport.refusals.RefusalLog`,
which logs them at a bounded rate. Nothing a connection does before its handshake can stop the loop.

The loop runs until ``stop`` is set; :meth:`Reception.wake` interrupts its wait at once.
"""

from __future__ import annotations

import collections
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable

from vsplit.transport.admission import Gate, Refused
from vsplit.transport.refusals import RefusalLog

log = logging.getLogger(__name__)

_TICK_S = 0.25
#: How long a connection whose first record is incomplete rests before the loop peeks at it again.
_REST_S = 0.005
#: The longest rest between two looks at an incomplete first record.
_REST_MAX_S = 0.25
_ACCEPTS_PER_WAKE = 256
_TLS_HANDSHAKE_RECORD = 0x16
#: The largest first record waited for: TLS's 16 KiB plaintext limit and room for the header and padding.
MAX_RECORD = (1 << 14) + 2048


class Reception:
    """Accepts connections on ``sock`` and hands each to ``handshake`` in its own thread (see the module docstring).

    ``handshake(conn, addr, first)`` owns ``conn`` (it must close it when refusing), gets the bytes already read from
    it (``first``, the whole first TLS record) and reports its own refusals.
    """

    def __init__(self, sock: socket.socket, *, gate: Gate, refusals: RefusalLog,
                 handshake: Callable[[socket.socket, tuple, bytes], None], name: str) -> None:
        self.sock, self.gate, self.refusals, self.handshake, self.name = sock, gate, refusals, handshake, name
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._waiting: collections.OrderedDict[socket.socket, tuple[tuple, float]] = collections.OrderedDict()
        self._resting: dict[socket.socket, float] = {}  # incomplete first record: unregistered until then
        self._rest: dict[socket.socket, float] = {}  # how long it rests next time

    def wake(self) -> None:
        """Interrupt the loop's wait (after setting its ``stop``)."""
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def run(self, stop: threading.Event) -> None:
        """Accept and dispatch connections until ``stop`` is set; closes the parked ones when it ends."""
        selector = selectors.DefaultSelector()
        try:
            self.sock.setblocking(False)
            selector.register(self.sock, selectors.EVENT_READ, "listen")
            selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            while not stop.is_set():
                for key, _ in selector.select(self._timeout()):
                    if key.data == "listen":
                        self._accept(selector)
                    elif key.data == "wake":
                        self._drain_wake()
                    else:
                        self._first_bytes(selector, key.fileobj)  # type: ignore[arg-type]
                self._wake_rested(selector)
                self._expire(selector)
                self.refusals.flush()
        except OSError as exc:
            if not stop.is_set() and self.sock.fileno() != -1:
                log.warning("%s: the listening socket failed: %s", self.name, exc)
        finally:
            for conn in self._waiting:
                conn.close()
            self._waiting.clear()
            self._resting.clear()
            self._rest.clear()
            selector.close()
            self._wake_r.close()
            self._wake_w.close()
            self.refusals.flush(force=True)

    # -- the steps -----------------------------------------------------------------------------------------------------
    def _timeout(self) -> float:
        if not self._waiting:
            return _TICK_S
        _, deadline = next(iter(self._waiting.values()))
        soonest = min(deadline, *self._resting.values()) if self._resting else deadline
        return max(0.0, min(_TICK_S, soonest - time.monotonic()))

    def _wake_rested(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for conn in [c for c, until in self._resting.items() if until <= now]:
            del self._resting[conn]
            selector.register(conn, selectors.EVENT_READ, self._waiting[conn][0])

    def _accept(self, selector: selectors.BaseSelector) -> None:
        policy = self.gate.policy
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                conn, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: the loop goes on
                if self.sock.fileno() == -1:
                    raise
                log.warning("%s: accepting a connection failed: %s", self.name, exc)
                return
            host = str(addr[0])
            if not self.gate.allowed(host):
                conn.close()
                self._refuse(host, addr, "its address is not in network.allow_from")
                continue
            if len(self._waiting) >= policy.max_waiting:
                old, (old_addr, _) = next(iter(self._waiting.items()))
                self._drop(selector, old)
                old.close()
                self._refuse(str(old_addr[0]), old_addr, f"{policy.max_waiting} connections were already waiting "
                             "for their first TLS record; the oldest was closed")
            conn.setblocking(False)
            selector.register(conn, selectors.EVENT_READ, addr)
            self._waiting[conn] = (addr, time.monotonic() + policy.first_record_s)

    def _first_bytes(self, selector: selectors.BaseSelector, conn: socket.socket) -> None:
        addr, _ = self._waiting[conn]
        try:
            got = conn.recv(MAX_RECORD + 5, socket.MSG_PEEK)  # seen, not taken: the handshake reads it
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            got = b""
        if not got:
            self._drop(selector, conn)
            conn.close()
            self._refuse(str(addr[0]), addr, "it closed before sending a whole TLS record")
            return
        if got[0] == _TLS_HANDSHAKE_RECORD and (len(got) < 5 or len(got) < 5 + min(MAX_RECORD,
                                                                                  int.from_bytes(got[3:5], "big"))):
            selector.unregister(conn)  # the rest of the record is still on its way: look again shortly
            rest = self._rest.get(conn, _REST_S)
            self._rest[conn] = min(2 * rest, _REST_MAX_S)
            self._resting[conn] = time.monotonic() + rest
            return
        self._drop(selector, conn)
        host = str(addr[0])
        try:
            slot = self.gate.enter(host)
        except Refused as exc:
            conn.close()
            self._refuse(host, addr, str(exc))
            return
        conn.setblocking(True)
        first = bytes(got)

        def run() -> None:
            try:
                self.handshake(conn, addr, first)
            finally:
                slot.release()

        threading.Thread(target=run, name=f"{self.name}-handshake", daemon=True).start()

    def _drop(self, selector: selectors.BaseSelector, conn: socket.socket) -> None:
        del self._waiting[conn]
        self._rest.pop(conn, None)
        if self._resting.pop(conn, None) is None:
            selector.unregister(conn)

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        while self._waiting:
            conn, (addr, deadline) = next(iter(self._waiting.items()))
            if deadline > now:
                return
            self._drop(selector, conn)
            conn.close()
            self._refuse(str(addr[0]), addr, f"it sent no whole TLS record within {self.gate.policy.first_record_s} s")

    def _refuse(self, host: str, addr: tuple, why: str) -> None:
        self.refusals.record(host, Refused(f"connection from {show(addr)}: {why}"))

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(64):
                pass
        except (BlockingIOError, InterruptedError, OSError):
            pass


def show(address: tuple) -> str:
    """``host:port``, with brackets around an IPv6 host.

    >>> show(("::1", 7700)), show(("127.0.0.1", 7700))
    ('[::1]:7700', '127.0.0.1:7700')
    """
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


__all__ = ["Reception", "show"]
