"""Who may start a TLS handshake with a listener: limits that hold before anything is known about a connection.

Theory of operation. Until its TLS handshake ends, a connection is only a source address, and a stranger needs no
key to open one. So a listener spends nothing but a file descriptor on a connection until it has sent its first
bytes, and bounds what strangers can take after that:

* **First record.** An accepted connection waits, without a thread, until its whole first TLS record has arrived;
  one that has not sent it within ``first_record_s`` (``network.first_record_timeout_s``, 1.5 s) is closed. An
  honest party sends its TLS ClientHello at once, so idle connections, and connections that send part of a record
  and stall, hold no handshake slot, however many there are (:mod:`vsplit.transport.reception`). At most
  ``max_waiting`` connections wait; past that the oldest one is closed.
* **Handshake slots.** A connection that has sent its first record takes one of ``max_handshakes`` slots for its
  handshake (bounded by ``handshake_timeout_s``), and a source address holds at most ``per_source`` of them at a
  time. A further ``reserved`` slots are for *trusted* addresses only: those in ``allow`` and those a pinned peer
  has already authenticated from during this run, so a partner coming back after a drop finds a slot even while
  strangers that complete TLS records fill the others. Trusted addresses have no per-source cap. A connection
  with no slot free is closed at once; the dialing party redials it with backoff
  (:func:`vsplit.transport.connect.dial`).
* **Allow-list.** With ``allow`` set (``network.allow_from``: addresses or networks such as ``"10.1.2.0/24"``),
  a connection from any other address is closed as soon as it is accepted.

Example:
    >>> gate = Gate(AdmissionPolicy(max_handshakes=2, per_source=1, reserved=1))
    >>> slot = gate.enter("198.51.100.7")
    >>> gate.enter("198.51.100.7")
    Traceback (most recent call last):
    ...
    vsplit.transport.admission.Refused: 198.51.100.7 already has 1 handshake(s) running (the per-address cap)
    >>> slot.release(); gate.enter("198.51.100.7").release()
    >>> gate.trust("203.0.113.9"); gate.trusted("203.0.113.9"), gate.allowed("192.0.2.1")
    (True, True)
"""

from __future__ import annotations

import ipaddress
import threading
from collections import Counter
from dataclasses import dataclass

from vsplit.errors import ConfigError, TransportError

#: Defaults of :class:`AdmissionPolicy`.
MAX_HANDSHAKES, PER_SOURCE, RESERVED, FIRST_RECORD_S, MAX_WAITING = 32, 4, 8, 1.5, 512


class Refused(TransportError):
    """A connection refused before its handshake (no slot, not allowed, silent); only the listener sees why."""


@dataclass(frozen=True)
class AdmissionPolicy:
    """The limits of :class:`Gate` (see the module docstring).

    >>> AdmissionPolicy(allow=("10.0.0.0/8", "nonsense"))
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: network.allow_from: 'nonsense' is not an IP address or network (e.g. "10.1.2.3" \
or "10.1.2.0/24")
    """

    max_handshakes: int = MAX_HANDSHAKES
    per_source: int = PER_SOURCE
    reserved: int = RESERVED
    first_record_s: float = FIRST_RECORD_S
    max_waiting: int = MAX_WAITING
    #: addresses or networks allowed to connect at all (empty: any)
    allow: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("max_handshakes", "per_source", "max_waiting"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.reserved < 0:
            raise ConfigError(f"reserved must be 0 or more, got {self.reserved}")
        if not 0 < self.first_record_s <= 60:
            raise ConfigError(f"network.first_record_timeout_s: must be above 0 and at most 60 s, got "
                              f"{self.first_record_s}")
        networks(self.allow)


def networks(allow: tuple[str, ...] | list[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Parse ``network.allow_from`` entries; a :class:`ConfigError` names the first bad one."""
    out = []
    for text in allow:
        try:
            out.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise ConfigError(f"network.allow_from: {text!r} is not an IP address or network (e.g. \"10.1.2.3\" or "
                              "\"10.1.2.0/24\")") from None
    return tuple(out)


class Slot:
    """One handshake slot; :meth:`release` gives it back (idempotent)."""

    def __init__(self, gate: Gate, host: str, reserved: bool) -> None:
        self._gate, self.host, self.reserved = gate, host, reserved
        self._held = True

    def release(self) -> None:
        with self._gate._lock:
            if self._held:
                self._held = False
                self._gate._free(self)


class Gate:
    """Handshake slots, the per-address cap, trusted addresses and the allow-list; thread-safe."""

    def __init__(self, policy: AdmissionPolicy | None = None) -> None:
        self.policy = policy if policy is not None else AdmissionPolicy()
        self._allow = networks(self.policy.allow)
        self._lock = threading.Lock()
        self._trusted: set[str] = set()
        self._by_source: Counter[str] = Counter()
        self._general = self._reserved = 0

    @property
    def running(self) -> int:
        """Handshakes running now (general and reserved slots)."""
        with self._lock:
            return self._general + self._reserved

    def allowed(self, host: str) -> bool:
        """Whether ``host`` may connect at all (always, without an allow-list)."""
        return not self._allow or self._listed(host)

    def trusted(self, host: str) -> bool:
        """Whether ``host`` may take a reserved slot: allow-listed, or a pinned peer authenticated from it."""
        with self._lock:
            return host in self._trusted or (bool(self._allow) and self._listed(host))

    def trust(self, host: str) -> None:
        """A pinned peer authenticated from ``host``: its later connections may take reserved slots."""
        with self._lock:
            self._trusted.add(host)

    def enter(self, host: str) -> Slot:
        """A handshake slot for a connection from ``host``, or :class:`Refused` saying why there is none."""
        trusted = self.trusted(host)
        p = self.policy
        with self._lock:
            if not trusted and self._by_source[host] >= p.per_source:
                raise Refused(f"{host} already has {self._by_source[host]} handshake(s) running (the per-address cap)")
            if self._general < p.max_handshakes:
                self._general += 1
                reserved = False
            elif trusted and self._reserved < p.reserved:
                self._reserved += 1
                reserved = True
            else:
                raise Refused(f"{p.max_handshakes} handshakes already running")
            self._by_source[host] += 1
            return Slot(self, host, reserved)

    def _free(self, slot: Slot) -> None:  # under the lock
        if slot.reserved:
            self._reserved -= 1
        else:
            self._general -= 1
        self._by_source[slot.host] -= 1
        if not self._by_source[slot.host]:
            del self._by_source[slot.host]

    def _listed(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in net for net in self._allow if net.version == address.version)


__all__ = ["AdmissionPolicy", "Gate", "Refused", "Slot", "networks"]
