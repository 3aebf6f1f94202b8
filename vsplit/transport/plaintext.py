"""A plaintext stream channel, for tests only.

vsplit never sends party data unencrypted. This module exists so tests can exercise the stream machinery and
show what an eavesdropper would see without TLS (the wire-tap test uses it as its positive control). It refuses
to run unless the environment variable ``VSPLIT_ALLOW_PLAINTEXT_FOR_TESTS`` is ``1``, and it warns loudly even
then. A real party rejects a plaintext client: see :mod:`vsplit.transport.tls`.

Example:
    >>> import os, socket, warnings
    >>> a, b = socket.socketpair()
    >>> insecure_plaintext_channel_for_tests(a, peer="bank")
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: plaintext channels are for tests only; set VSPLIT_ALLOW_PLAINTEXT_FOR_TESTS=1 in a \
test, and use `open_channels` (mutual TLS) everywhere else
    >>> a.close(); b.close()
"""

from __future__ import annotations

import logging
import os
import socket
import warnings

from vsplit.errors import ConfigError
from vsplit.transport.sockio import send_all
from vsplit.transport.stream import ChannelOptions, StreamChannel

log = logging.getLogger(__name__)

#: The environment variable that must be ``1`` before a plaintext channel is built.
ALLOW_ENV = "VSPLIT_ALLOW_PLAINTEXT_FOR_TESTS"


class InsecureTransportWarning(UserWarning):
    """A channel without encryption or authentication was built."""


class _PlainLayer:
    """The identity record layer on a non-blocking socket: wire bytes are the plaintext."""

    closes_explicitly = False
    ended = False

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._sent = self._received = 0

    def write(self, data: bytes | memoryview, *, timeout: float) -> None:
        send_all(self._sock.send, self._sock, data, timeout=timeout)
        self._sent += len(data)

    def read_into(self, room: memoryview) -> int | None:
        try:
            n = self._sock.recv_into(room)
        except (BlockingIOError, InterruptedError):
            return None
        self._received += n
        return n

    def buffered(self) -> bool:
        return False

    def goodbye(self, *, timeout: float) -> None:
        self._sock.shutdown(socket.SHUT_WR)

    def counted(self) -> tuple[int, int]:
        return self._sent, self._received


def insecure_plaintext_channel_for_tests(
    sock: socket.socket, *, peer: str, options: ChannelOptions | None = None
) -> StreamChannel:
    """Wrap a connected socket in an UNENCRYPTED, UNAUTHENTICATED channel; tests only.

    Raises :class:`ConfigError` unless ``VSPLIT_ALLOW_PLAINTEXT_FOR_TESTS=1``; warns with
    :class:`InsecureTransportWarning` and logs an error whenever it runs.
    """
    if os.environ.get(ALLOW_ENV) != "1":
        raise ConfigError(
            f"plaintext channels are for tests only; set {ALLOW_ENV}=1 in a test, "
            "and use `open_channels` (mutual TLS) everywhere else"
        )
    text = f"INSECURE: plaintext channel to {peer!r}: no encryption, no authentication (tests only)"
    warnings.warn(text, InsecureTransportWarning, stacklevel=2)
    log.error(text)
    return StreamChannel(sock, _PlainLayer(sock), peer=peer, options=options)


__all__ = ["ALLOW_ENV", "InsecureTransportWarning", "insecure_plaintext_channel_for_tests"]
