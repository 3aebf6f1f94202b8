"""A link emulator: a user-space TCP relay with a one-way delay, a bandwidth cap and resets at chosen byte offsets.

This kernel has no ``netem`` and tests run without root, so a WAN link between two parties is emulated in user
space: a client (the dialing party) connects to the relay, the relay connects to the target (the listening
party) and forwards both directions.

Theory of operation. Each direction of each connection has a reader thread and a writer thread. The reader stamps
every piece it reads (at most 16 KiB) with its delivery time, as a link of ``bandwidth_bps`` with a one-way
``delay_s`` would deliver it: the piece starts down the wire when it arrived or when the previous piece finished,
whichever is later, finishes ``8 * len / bandwidth_bps`` seconds later and arrives ``delay_s`` after that. The
writer sends each piece no earlier than its delivery time, in order. The first bytes a new connection sends
depart one round trip late, as the SYN / SYN-ACK exchange of a real TCP connection would make them. Each direction
buffers at most ``buffer_bytes``; beyond that the reader stops reading and TCP flow control slows the sender.

Resets. ``resets=[("up", 100_000)]`` resets the connection once 100,000 bytes have been delivered from client to
target (``"down"``: target to client), counted over the emulator's life, across connections: exactly that many
bytes get through, then both sockets are closed with ``SO_LINGER`` 0 (a TCP RST to each end) and whatever was
still buffered is lost, as on a real drop. Later connections through the relay work again. Each reset fires once;
:meth:`LinkEmulator.reset_at` arms one while running.

Usable from tests and benchmarks::

    with LinkEmulator(target=("127.0.0.1", 9001), delay_s=0.01, bandwidth_bps=100e6) as link:
        connect_to(link.address)

and from the command line::

    python benchmarks/linkem.py --listen 127.0.0.1:9000 --target 127.0.0.1:9001 --rtt-ms 20 --mbit 100
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Direction = Literal["up", "down"]
DIRECTIONS: tuple[Direction, ...] = ("up", "down")
_READ = 64 * 1024
_PIECE = 16 * 1024
_TICK_S = 0.05
_EOF, _RESET = object(), object()


@dataclass(frozen=True)
class ResetEvent:
    """A reset the emulator performed: after ``offset`` bytes in ``direction``, at ``time.monotonic()`` ``at``."""

    direction: Direction
    offset: int
    at: float


class LinkEmulator:
    """A TCP relay from ``listen`` to ``target`` that behaves like a WAN link (see the module docstring).

    ``address`` is where clients connect. ``passed`` counts the bytes delivered per direction; ``resets_done``
    lists the resets performed; with ``record=True``, ``recorded`` keeps every byte that arrived per direction.
    ``target_retry_s``: if the target refuses a connection, keep trying it for this long before resetting the
    client (a client may dial before the target listens, as parties do).
    """

    def __init__(
        self,
        *,
        target: tuple[str, int],
        listen: tuple[str, int] = ("127.0.0.1", 0),
        delay_s: float = 0.0,
        bandwidth_bps: float | None = None,
        resets: Iterable[tuple[Direction, int]] = (),
        record: bool = False,
        buffer_bytes: int = 4 << 20,
        target_retry_s: float = 10.0,
    ) -> None:
        if delay_s < 0 or (bandwidth_bps is not None and bandwidth_bps <= 0):
            raise ValueError("delay_s must be >= 0 and bandwidth_bps > 0 (or None for no cap)")
        self.target = target
        self.delay_s = delay_s
        self.bandwidth_bps = bandwidth_bps
        self.buffer_bytes = buffer_bytes
        self.target_retry_s = target_retry_s
        self.passed: dict[Direction, int] = dict.fromkeys(DIRECTIONS, 0)
        self.recorded: dict[Direction, bytearray] | None = {d: bytearray() for d in DIRECTIONS} if record else None
        self.resets_done: list[ResetEvent] = []
        self.connections = 0
        self._armed: list[tuple[Direction, int]] = []
        self._lock = threading.Lock()
        self._live: list[_Connection] = []
        self._closed = False
        for direction, offset in resets:
            self.reset_at(direction, offset)
        self._server = socket.create_server(listen, backlog=16)
        self.address: tuple[str, int] = self._server.getsockname()[:2]
        self._server.settimeout(_TICK_S)
        self._acceptor = threading.Thread(target=self._accept_loop, name="linkem-accept", daemon=True)
        self._acceptor.start()

    def reset_at(self, direction: Direction, offset: int) -> None:
        """Arm a reset once ``offset`` bytes have been delivered in ``direction`` (counted from the start)."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        with self._lock:
            self._armed.append((direction, int(offset)))
            self._armed.sort(key=lambda item: item[1])

    def reset_now(self) -> None:
        """Reset every live connection at once (each end gets a TCP RST)."""
        with self._lock:
            live = list(self._live)
            self.resets_done.extend(ResetEvent("up", self.passed["up"], time.monotonic()) for _ in live)
        for conn in live:
            conn.reset()

    def close(self) -> None:
        """Stop accepting and reset every live connection."""
        self._closed = True
        self._server.close()
        self._acceptor.join(timeout=2)
        for conn in list(self._live):
            conn.reset()

    def __enter__(self) -> LinkEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._open, args=(client,), name="linkem-open", daemon=True).start()

    def _open(self, client: socket.socket) -> None:
        accepted = time.monotonic()
        server = None
        while server is None:
            try:
                server = socket.create_connection(self.target, timeout=2)
            except OSError:
                if self._closed or time.monotonic() - accepted > self.target_retry_s:
                    _hard_close(client)
                    return
                time.sleep(0.05)
        try:
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(_TICK_S)
        except OSError:  # the client left already
            _hard_close(client)
            _hard_close(server)
            return
        conn = _Connection(self, client, server, start=accepted + 2 * self.delay_s)
        with self._lock:
            self.connections += 1
            self._live.append(conn)
        conn.start()

    def _deliver(self, conn: _Connection, direction: Direction, size: int) -> int:
        """How many of ``size`` bytes may pass before a reset (``size`` if none is due); counts them as passed."""
        with self._lock:
            start = self.passed[direction]
            due = next((off for d, off in self._armed if d == direction and off <= start + size), None)
            if due is None:
                self.passed[direction] = start + size
                return size
            self._armed.remove((direction, due))
            allowed = max(0, due - start)
            self.passed[direction] = start + allowed
            self.resets_done.append(ResetEvent(direction, due, time.monotonic()))
            return allowed

    def _record(self, direction: Direction, data: bytes) -> None:
        if self.recorded is not None:
            with self._lock:
                self.recorded[direction] += data

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            if conn in self._live:
                self._live.remove(conn)


class _Connection:
    """One client connection and its connection to the target: two directions, four threads."""

    def __init__(self, link: LinkEmulator, client: socket.socket, server: socket.socket, *, start: float) -> None:
        self.link, self.client, self.server = link, client, server
        self.dead = False
        self._lock = threading.Lock()
        self.pipes = [
            _Pipe(self, "up", client, server, free_at=start),
            _Pipe(self, "down", server, client, free_at=time.monotonic()),
        ]

    def start(self) -> None:
        for pipe in self.pipes:
            pipe.start()

    def reset(self) -> None:
        """Close both sockets with SO_LINGER 0: each end gets a TCP RST; buffered bytes are lost."""
        with self._lock:
            if self.dead:
                return
            self.dead = True
        for sock in (self.client, self.server):
            _hard_close(sock)
        for pipe in self.pipes:
            pipe.wake()
        self.link._forget(self)

    def half_done(self) -> None:
        if all(pipe.finished for pipe in self.pipes):
            for sock in (self.client, self.server):
                sock.close()
            self.link._forget(self)


class _Pipe:
    """One direction: a reader that schedules pieces and a writer that delivers them on time."""

    def __init__(self, conn: _Connection, direction: Direction, src: socket.socket, dst: socket.socket, *,
                 free_at: float) -> None:
        self.conn, self.direction, self.src, self.dst = conn, direction, src, dst
        self.free_at = free_at
        self.finished = False
        self._queue: deque[tuple[float, bytes] | object] = deque()
        self._queued = 0
        self._cond = threading.Condition()

    def start(self) -> None:
        for target, name in ((self._read_loop, "read"), (self._write_loop, "write")):
            threading.Thread(target=target, name=f"linkem-{self.direction}-{name}", daemon=True).start()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _put(self, item: tuple[float, bytes] | object, size: int = 0) -> None:
        with self._cond:
            while size and self._queued > self.conn.link.buffer_bytes and not self.conn.dead:
                self._cond.wait(_TICK_S)
            self._queue.append(item)
            self._queued += size
            self._cond.notify_all()

    def _read_loop(self) -> None:
        link = self.conn.link
        while not self.conn.dead:
            try:
                data = self.src.recv(_READ)
            except TimeoutError:
                continue
            except OSError:
                self._put(_RESET)
                return
            if not data:
                self._put(_EOF)
                return
            now = time.monotonic()
            link._record(self.direction, data)
            for i in range(0, len(data), _PIECE):
                piece = data[i : i + _PIECE]
                begin = max(now, self.free_at)
                self.free_at = begin + (8 * len(piece) / link.bandwidth_bps if link.bandwidth_bps else 0.0)
                self._put((self.free_at + link.delay_s, piece), len(piece))

    def _write_loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue and not self.conn.dead:
                        self._cond.wait(_TICK_S)
                    if self.conn.dead:
                        return
                    item = self._queue[0]
                    if item is _EOF or item is _RESET:
                        self._queue.popleft()
                    else:
                        due = item[0]  # type: ignore[index]
                        wait = due - time.monotonic()
                        if wait > 0:
                            self._cond.wait(wait)
                            continue
                        batch = []  # every piece that is due goes out in one send
                        while self._queue and self._queue[0] not in (_EOF, _RESET) and \
                                self._queue[0][0] <= time.monotonic():  # type: ignore[index]
                            batch.append(self._queue.popleft()[1])  # type: ignore[index]
                        item = b"".join(batch)
                        self._queued -= len(item)
                        self._cond.notify_all()
                if item is _EOF:
                    try:
                        self.dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                if item is _RESET:
                    self.conn.reset()
                    return
                allowed = self.conn.link._deliver(self.conn, self.direction, len(item))  # type: ignore[arg-type]
                if not self._send(item[:allowed]) or allowed < len(item):  # type: ignore[index]
                    self.conn.reset()
                    return
        finally:
            self.finished = True
            self.conn.half_done()

    def _send(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            if self.conn.dead:
                return False
            try:
                sent = self.dst.send(view)
            except TimeoutError:
                continue
            except OSError:
                return False
            view = view[sent:]
        return True


def _hard_close(sock: socket.socket) -> None:
    """Close with SO_LINGER 0 so the peer gets a TCP RST; wake any thread blocked on the socket first."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    sock.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def _reset(text: str) -> tuple[Direction, int]:
    direction, _, offset = text.partition(":")
    if direction not in DIRECTIONS or not offset.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not up:BYTES or down:BYTES")
    return direction, int(offset)  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", type=_address, required=True, help="HOST:PORT clients connect to")
    parser.add_argument("--target", type=_address, required=True, help="HOST:PORT the relay connects to")
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="round-trip time to add (half each way)")
    parser.add_argument("--mbit", type=float, default=None, help="bandwidth cap per direction, Mbit/s")
    parser.add_argument("--reset", type=_reset, action="append", default=[],
                        help="reset after BYTES in a direction, e.g. up:1000000 (repeatable)")
    args = parser.parse_args(argv)
    link = LinkEmulator(target=args.target, listen=args.listen, delay_s=args.rtt_ms / 2000,
                        bandwidth_bps=args.mbit * 1e6 if args.mbit else None, resets=args.reset)
    cap = f"{args.mbit:g} Mbit/s" if args.mbit else "no bandwidth cap"
    print(f"linkem: {link.address[0]}:{link.address[1]} -> {args.target[0]}:{args.target[1]}, "
          f"RTT +{args.rtt_ms:g} ms, {cap}; Ctrl-C stops", file=sys.stderr)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        link.close()
        print(f"linkem: {link.connections} connection(s), bytes up {link.passed['up']}, down {link.passed['down']}, "
              f"resets {len(link.resets_done)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
