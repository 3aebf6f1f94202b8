"""What the kernel counts for one TCP connection: payload bytes sent and received, handshakes and headers included.

A channel whose TLS runs on the socket itself (:mod:`vsplit.transport.tls`) never sees its own wire bytes, so it
asks the kernel: Linux's ``TCP_INFO`` holds ``tcpi_bytes_sent``, ``tcpi_bytes_retrans`` and ``tcpi_bytes_received``
(kernel 4.19 and later), the TCP payload octets of the connection. Sent bytes leave out retransmissions: a segment
the kernel sends again (a lost packet, or a loaded machine's loopback) is the network's cost, not the protocol's, and
counting it would make the same run's traffic differ from one run to the next. Elsewhere :func:`tcp_bytes` returns
``None`` and the channel falls back to its own estimate.

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

#: Offsets of ``tcpi_bytes_received``, ``tcpi_bytes_sent`` and ``tcpi_bytes_retrans`` in Linux's ``struct tcp_info``
#: (an append-only ABI), and the size that holds them all.
_RECEIVED_AT, _SENT_AT, _RETRANS_AT, _SIZE = 128, 200, 208, 216


def tcp_bytes(sock: socket.socket) -> tuple[int, int] | None:
    """``(sent, received)`` TCP payload bytes of ``sock``'s connection, as the kernel counts them (sent without
    retransmissions); ``None`` where the operating system does not tell (not Linux, an old kernel, not a TCP socket, a
    closed socket)."""
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
    (retransmitted,) = struct.unpack_from("=Q", info, _RETRANS_AT)
    return sent - retransmitted, received


__all__ = ["tcp_bytes"]
