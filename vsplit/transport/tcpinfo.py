"""What the kernel counts for one TCP connection: payload bytes sent and received, handshakes and headers included.

A channel whose TLS runs on the socket itself (:mod:`vsplit.transport.tls`) never sees its own wire bytes, so it
asks the kernel: Linux's ``TCP_INFO`` holds ``tcpi_bytes_sent`` and ``tcpi_bytes_received`` (kernel 4.19 and
later), the TCP payload octets of the connection, exactly what a tap on the wire would count. Elsewhere
:func:`tcp_bytes` returns ``None`` and the channel falls back to its own estimate.

Example:
    >>> import socket
    >>> a, b = socket.socketpair()  # not TCP: the kernel keeps no such counts
    >>> tcp_bytes(a) is None
    True
    >>> a.close(); b.close()
"""

from __future__ import annotations

import socket
import struct

#: Offsets of ``tcpi_bytes_received`` and ``tcpi_bytes_sent`` in Linux's ``struct tcp_info`` (append-only ABI).
_RECEIVED_AT, _SENT_AT, _SIZE = 128, 200, 208


def tcp_bytes(sock: socket.socket) -> tuple[int, int] | None:
    """``(sent, received)`` TCP payload bytes of ``sock``'s connection, as the kernel counts them; ``None`` where the
    operating system does not tell (not Linux, an old kernel, not a TCP socket, a closed socket)."""
    option = getattr(socket, "TCP_INFO", None)
    if option is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, option, 256)
    except (OSError, ValueError):
        return None
    if len(info) < _SIZE:
        return None
    (received,) = struct.unpack_from("=Q", info, _RECEIVED_AT)
    (sent,) = struct.unpack_from("=Q", info, _SENT_AT)
    return sent, received


__all__ = ["tcp_bytes"]
