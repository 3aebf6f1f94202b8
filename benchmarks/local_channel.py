"""A plaintext channel over a local (Unix-domain) socket, for benchmarks between processes of one machine.

It implements the :class:`vsplit.transport.channel.Channel` interface: frames are length-prefixed on the stream,
and a reader thread drains the socket into a queue, so two parties that both send large frames at once never
deadlock on full socket buffers. Never use it between machines: it has no encryption and no authentication (the
mutual-TLS channel in :mod:`vsplit.transport` is for that).
"""

from __future__ import annotations

import queue
import socket
import struct
import threading

from vsplit.errors import TransportError
from vsplit.transport.channel import take

_LENGTH = struct.Struct("<I")
_CLOSED = object()


class LocalSocketChannel:
    """One end of a framed, local socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._send_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, name="local-channel-reader", daemon=True)
        self._reader.start()

    def send(self, frame: bytes) -> None:
        if self._closed:
            raise TransportError("channel is closed")
        with self._send_lock:
            self._sock.sendall(_LENGTH.pack(len(frame)))
            self._sock.sendall(frame)

    def recv(self, timeout: float | None) -> bytes | bytearray:
        if self._closed:
            raise TransportError("channel is closed")
        item = take(lambda t: self._inbox.get(block=t != 0, timeout=t or None), timeout)
        if item is _CLOSED or isinstance(item, Exception):
            self._closed = True
            raise TransportError(f"the peer closed the channel ({item if item is not _CLOSED else 'EOF'})")
        return item

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()

    def _read_exact(self, n: int) -> bytearray | None:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                return None
            got += k
        return buf

    def _read_loop(self) -> None:
        try:
            while True:
                head = self._read_exact(_LENGTH.size)
                if head is None:
                    break
                body = self._read_exact(_LENGTH.unpack(head)[0])
                if body is None:
                    break
                self._inbox.put(body)
        except OSError as exc:
            if not self._closed:
                self._inbox.put(exc)
            return
        self._inbox.put(_CLOSED)


def listen(path: str) -> socket.socket:
    """A listening Unix socket at ``path``."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    return server


def accept(server: socket.socket, *, timeout: float = 60.0) -> LocalSocketChannel:
    """Accept one peer on ``server``."""
    server.settimeout(timeout)
    sock, _ = server.accept()
    sock.settimeout(None)
    return LocalSocketChannel(sock)


def dial(path: str) -> LocalSocketChannel:
    """Connect to the Unix socket at ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return LocalSocketChannel(sock)
