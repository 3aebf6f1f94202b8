"""Run a horizontal schedule with every party in this one process, over memory channels and the real codec.

Example:
    >>> import torch
    >>> from vsplit.topology import Horizontal, Topology
    >>> h = Horizontal(Topology.vanilla(client="client", server="lab", width=2), client="client", clients=["a", "b"])
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch...>
    >>> def sgd(params):
    ...     return torch.optim.SGD(params, lr=0.1)
    >>> def rows(n):
    ...     return {"bottom": (torch.zeros(n, 0, dtype=torch.long), torch.randn(n, 3))}
    >>> class Bottom(torch.nn.Linear):
    ...     def forward(self, cat, num):
    ...         return super().forward(num)
    >>> clients = {c: ClientSide({"bottom": Bottom(3, 2)}, rows(20), sgd) for c in ("a", "b")}
    >>> server = ServerSide({"top": torch.nn.Linear(2, 1)}, sgd,
    ...                     labels={c: (torch.rand(20) < 0.5).float() for c in ("a", "b")})
    >>> out = train_horizontal(h, Settings(kind="splitfed_v1", rounds=2, batch_size=8), clients, server)
    >>> [r["client"] for r in out["lab"].history]
    ['a', 'b', 'a', 'b']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vsplit.app.local import run_sessions
from vsplit.horizontal.schedule import Settings, stage_order
from vsplit.horizontal.sealed import new_key, public_bytes
from vsplit.horizontal.session import (
    ClientSide,
    HandoffKeys,
    HorizontalOutcome,
    ServerSide,
    client_session,
    clients_state_size,
    federated_session,
    server_session,
)
from vsplit.runtime.pump import Tap
from vsplit.topology.horizontal import Horizontal


def train_horizontal(
    h: Horizontal,
    settings: Settings,
    clients: Mapping[str, ClientSide],
    server: ServerSide | None,
    *,
    session: bytes = b"horizontal-run-1",
    taps: Iterable[Tap] = (),
    pumps: dict | None = None,
) -> dict[str, HorizontalOutcome]:
    """Train ``h`` on ``settings``'s schedule; every party's :class:`HorizontalOutcome` by name.

    Sealed hand-offs use fresh X25519 keys for this run (between organizations each client's key is configured).
    """
    rows = {c: clients[c].rows for c in h.clients}
    run_id = session.decode(errors="replace")
    size = clients_state_size(h, settings, clients)
    own = {c: new_key() for c in h.clients}
    public = {c: public_bytes(k) for c, k in own.items()}
    keys = {c: HandoffKeys(own[c], public, context=session) for c in h.clients}
    sessions = {c: client_session(c, h, settings, rows, clients[c], keys[c], run_id=run_id) for c in h.clients}
    sessions[h.server] = server_session(h, settings, rows, server, run_id=run_id, state_size=size)
    fed = settings.federated_server
    if fed is not None and fed != h.server:
        sessions[fed] = federated_session(fed, h, settings, rows, run_id=run_id, state_size=size)
    return run_sessions(sessions, session=session, taps=taps, pumps=pumps, order=stage_order)  # type: ignore[return-value]
