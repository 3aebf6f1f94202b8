"""Free local ports for parties started on one machine (pilots, benchmarks, tests).

Example:
    >>> a, b = free_ports(2)
    >>> a != b
    True
"""

from __future__ import annotations

import socket


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports of 127.0.0.1 free now (all bound at once, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()
