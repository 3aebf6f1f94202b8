"""Horizontal splits: many clients with the same columns, each with its own rows, and one server.

Theory of operation. A :class:`Horizontal` is one pairwise topology (``vanilla`` or ``u_shaped``) *replicated* over
N clients: every client owns a copy of the same client segments (same names, same shapes) and feeds them its own
rows; the server owns the server segments. In a vanilla split the labels sit with the server (sent to it, or held by
it); in a U-shaped split each client keeps its labels and last layers. The schedules (:mod:`vsplit.horizontal`)
then run each client's pairwise topology (:meth:`Horizontal.pair`) on the ordinary split machine, one after another
or side by side, and average or hand on the client segments between them.

Every pairwise topology carries the fingerprint of the whole horizontal set-up in its ``kind``, so a client
configured with other clients, another server or other widths is refused by the server's machine at ``Ready``.

Example:
    >>> h = Horizontal(Topology.vanilla(client="client", server="lab", width=8), client="client", clients=["a", "b"])
    >>> h.client_segments, h.server_segments, h.labels_at_server
    (('bottom',), ('top',), True)
    >>> [(c.src_owner, c.dst) for c in h.pair("b").cuts]
    [('b', 'lab')]
    >>> h.local("a").cuts, h.local("a").label_owner
    ((), 'a')
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from vsplit.errors import ConfigError
from vsplit.topology.graph import Topology, _digest

#: The pairwise topologies a horizontal split replicates.
KINDS = ("vanilla", "u_shaped")


@dataclass(frozen=True)
class Horizontal:
    """N clients, each with a copy of ``base``'s client segments and its own rows, and ``base``'s server.

    ``base`` is a pairwise topology between the parties ``client`` and ``server``, ``clients`` the real client
    names: ``Horizontal(Topology.vanilla(client="client", server="lab"), client="client", clients=["a", "b"])``.
    """

    base: Topology
    client: str
    clients: tuple[str, ...]
    server: str = field(init=False)

    def __post_init__(self) -> None:
        if self.base.kind not in KINDS:
            raise ConfigError(f"a horizontal split replicates one of {list(KINDS)}, not {self.base.kind!r}")
        parties = self.base.parties
        if self.client not in parties or len(parties) != 2:
            raise ConfigError(f"{self.client!r} is not the client of this {self.base.kind} topology {list(parties)}")
        server = next(p for p in parties if p != self.client)
        clients = tuple(self.clients)
        if not clients:
            raise ConfigError("a horizontal split needs at least one client")
        if len(set(clients)) != len(clients) or server in clients or any(not c for c in clients):
            raise ConfigError(f"client names must be unique, non-empty and not the server's: {list(clients)}")
        object.__setattr__(self, "clients", clients)
        object.__setattr__(self, "server", server)

    @property
    def kind(self) -> str:
        return self.base.kind

    @property
    def client_segments(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.base.segments_of(self.client))

    @property
    def server_segments(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.base.segments_of(self.server))

    @property
    def labels_at_server(self) -> bool:
        """Vanilla: the server holds (or is sent) every client's labels; U-shaped: each client keeps its own."""
        return self.base.label_owner == self.server

    @property
    def parties(self) -> tuple[str, ...]:
        return (*self.clients, self.server)

    def to_dict(self) -> dict[str, object]:
        return {"base": self.base.to_dict(), "client": self.client, "clients": list(self.clients),
                "server": self.server}

    def fingerprint(self) -> str:
        """A digest of the whole set-up: the replicated topology, every client's name, the server's."""
        return _digest(self.to_dict())

    def pair(self, client: str) -> Topology:
        """``client``'s pairwise topology with the server: what its split machine and the server's run."""
        self._check(client)
        segments = tuple(replace(s, owner=client) if s.owner == self.client else s for s in self.base.segments)
        return Topology(segments, kind=f"horizontal-{self.kind}@{self.fingerprint()[:16]}")

    def local(self, client: str) -> Topology:
        """Every segment placed on ``client``: the whole model trained where the rows are (FedAvg)."""
        return self.pair(client).placed_on(client)

    def _check(self, client: str) -> None:
        if client not in self.clients:
            raise ConfigError(f"{client!r} is not a client of this horizontal split; its clients are "
                              f"{list(self.clients)}")

