"""A horizontal party config: many clients with the same columns, one server, and the schedule they train by.

Every party lists the same ``topology.clients``, ``topology.server``, ``topology.segments`` and ``[schedule]``;
what differs is its own name and role: a client is a ``label`` party (it holds its rows and their labels), the
server and a separate federated server are ``compute`` parties (no data). The server (and a federated server)
listen; each client dials the server (``network.dial``) and every further peer it reaches
(``network.addresses``: the federated server; with ``schedule.route = "direct"`` the clients listed before it, while
it listens for those after it on ``network.listen``). A client also pins the other clients' certificates
(``network.client_certs``) where their signed keys are used: secure aggregation, or sealed relayed hand-offs.

Example:
    >>> from vsplit.config.schema import *
    >>> net = NetworkSection(key="k", cert="c", peers={"server": "s.pem"}, dial="127.0.0.1:1",
    ...                      client_certs={"b": "b.pem", "c": "c.pem"})
    >>> top = TopologySection(kind="horizontal", clients=("a", "b", "c"), server="server")
    >>> config = PartyConfig(party=PartySection(name="a", role="label"), network=net, topology=top,
    ...                      data=DataSection(path="a.csv", label="y"))
    >>> horizontal_checks(config)
    []
    >>> horizontal_of(config).parties
    ('a', 'b', 'c', 'server')
    >>> links(config)
    {'server': ('dial', '127.0.0.1:1')}
"""

from __future__ import annotations

from typing import Any

from vsplit.config.schema import PartyConfig
from vsplit.errors import ConfigError
from vsplit.models.recipe import BATCH_SIZE

SEGMENTS = ("vanilla", "u_shaped")


def horizontal_checks(config: PartyConfig) -> list[str]:
    """Every problem of a horizontal config, each naming its key."""
    from vsplit.horizontal.schedule import (
        BUFFER_POLICIES,
        HANDOFFS,
        INTERLEAVES,
        LR_SCHEDULES,
        OPTIMIZER_POLICIES,
        ORDERS,
        ROUTES,
        SCHEDULES,
    )

    errors: list[str] = []
    t, s, party, data, net = config.topology, config.schedule, config.party, config.data, config.network
    clients, server, fed = list(t.clients), t.server, s.federated_server
    if len(clients) < 1 or len(set(clients)) != len(clients) or "" in clients:
        errors.append(f"topology.clients: list the clients' names, each once (got {clients})")
    if not server or server in clients:
        errors.append("topology.server: name the server (a party that is not a client)")
    if fed and (fed in clients or fed == server):
        errors.append("schedule.federated_server: a separate party, neither a client nor the server (or leave it "
                      "empty: the server averages)")
    if t.segments not in SEGMENTS:
        errors.append(f"topology.segments: must be one of {', '.join(SEGMENTS)}; got {t.segments!r}")
    for key, value, allowed in (("kind", s.kind, SCHEDULES), ("order", s.order, ORDERS), ("route", s.route, ROUTES),
                                ("handoff", s.handoff, HANDOFFS), ("interleave", s.interleave, INTERLEAVES),
                                ("optimizer_policy", s.optimizer_policy, OPTIMIZER_POLICIES),
                                ("buffer_policy", s.buffer_policy, BUFFER_POLICIES),
                                ("secure_aggregation", s.secure_aggregation, ("auto", "on", "off")),
                                ("lr_schedule", s.lr_schedule, LR_SCHEDULES)):
        if value not in allowed:
            errors.append(f"schedule.{key}: must be one of {', '.join(allowed)}; got {value!r}")
    if not 0 < s.lr_step_at <= 1 or not 0 <= s.lr_factor <= 1:
        errors.append(f"schedule.lr_step_at, schedule.lr_factor: lr_step_at must be in (0, 1] (a fraction of the "
                      f"rounds) and lr_factor in [0, 1]; got {s.lr_step_at} and {s.lr_factor}")
    if s.kind in ("sequential", "fedavg") and fed:
        errors.append(f"schedule.federated_server: {s.kind} needs no separate federated server (sequential averages "
                      "nothing; in fedavg the server only averages); remove it")
    if t.task == "multiclass":
        errors.append("topology.task: horizontal schedules between processes take binary or regression labels for "
                      "now; multiclass runs in one process (vsplit.horizontal.train_horizontal)")
    if errors:
        return errors
    me = party.name
    if me in clients:
        if party.role != "label":
            errors.append("party.role: a client of a horizontal split holds its rows and labels: role = \"label\"")
        if not data.path or not data.label:
            errors.append("data.path, data.label: a client names its table and its label column")
    elif me in (server, fed):
        if party.role != "compute":
            errors.append("party.role: the server and the federated server hold no data: role = \"compute\"")
        if data.path or data.label or data.test_path:
            errors.append("data: the server and the federated server hold no data; remove the [data] keys")
    else:
        errors.append(f"party.name: {me!r} is neither a client ({', '.join(clients)}), the server ({server!r}) nor "
                      "the federated server; fix the name or topology.clients")
        return errors
    wanted = set(peers_of(config))
    if set(net.peers) != wanted:
        errors.append(f"network.peers: {me} talks to {sorted(wanted)}; pin exactly their certificates (got "
                      f"{sorted(net.peers)})")
    try:
        links(config)
    except ConfigError as exc:
        errors.append(str(exc))
    others = {c for c in clients if c != me}
    signs = signs_keys(kind=s.kind, route=s.route, secure_aggregation=s.secure_aggregation,
                       optimizer_policy=s.optimizer_policy, clients=len(clients))
    uses = "relayed hand-offs are sealed to" if s.kind == "sequential" else "secure aggregation masks with"
    if me in clients and signs and set(net.client_certs) != others:
        errors.append(f"network.client_certs: {uses} the other clients' keys, which each client signs; pin the "
                      f"certificates of {sorted(others)} (got {sorted(net.client_certs)})")
    elif net.client_certs and not (me in clients and signs):
        errors.append("network.client_certs: only a client of a sequential schedule relayed by the server, or of a "
                      "schedule under secure aggregation, uses them; remove them")
    batch = 1 if config.train.batch_size is None else config.train.batch_size  # left out: the default, fine
    for key, value in (("train.epochs", config.train.epochs), ("train.batch_size", batch)):
        if value < 1:
            errors.append(f"{key}: must be at least 1, got {value}")
    if config.train.pipeline_window * config.train.local_steps > 1:
        errors.append("train.pipeline_window, train.local_steps: horizontal schedules run exactly; set both to 1")
    if config.privacy.defenses or config.privacy.detectors:
        errors.append("privacy: defenses and detectors are not wired into horizontal schedules yet; remove them")
    if config.train.networks != 1:
        errors.append(f"train.networks: a bag of networks trains vertical, vanilla and u_shaped splits; horizontal "
                      f"schedules train one network, set networks = 1 (got {config.train.networks})")
    return errors


def signs_keys(*, kind: str, route: str, secure_aggregation: str, optimizer_policy: str, clients: int) -> bool:
    """Whether the clients' run keys, signed with their TLS identities, are used: to seal relayed sequential
    hand-offs, or to seed the masks of secure aggregation (which ``auto`` turns on with 3 or more clients).

    >>> signs_keys(kind="splitfed_v1", route="server", secure_aggregation="auto", optimizer_policy="keep", clients=3)
    True
    """
    if kind == "sequential":
        return route == "server"
    from vsplit.horizontal.schedule import Settings

    try:  # the schedule's own rule (Settings.secure), not a copy of it
        return Settings(kind=kind, secure_aggregation=secure_aggregation, optimizer_policy=optimizer_policy).secure(
            clients)
    except ConfigError:  # settings refused elsewhere, each error naming its key
        return secure_aggregation == "on"


def peers_of(config: PartyConfig) -> list[str]:
    """The parties this party exchanges messages with."""
    t, s, me = config.topology, config.schedule, config.party.name
    clients, server, fed = list(t.clients), t.server, config.schedule.federated_server
    if me in (server, fed):
        return clients
    out = [server]
    if fed:
        out.append(fed)
    if s.kind == "sequential" and s.route == "direct":
        out += [c for c in clients if c != me]
    return out


def links(config: PartyConfig) -> dict[str, tuple[str, str]]:
    """How this party reaches each peer: ``peer -> ("listen" | "dial", HOST:PORT)``; a :class:`ConfigError` names
    the missing key."""
    t, s, net, me = config.topology, config.schedule, config.network, config.party.name
    clients, server, fed = list(t.clients), t.server, s.federated_server
    out: dict[str, tuple[str, str]] = {}
    if me in (server, fed):
        if not net.listen:
            raise ConfigError(f"network.listen: the {'server' if me == server else 'federated server'} listens for "
                              "the clients; set e.g. listen = \"0.0.0.0:7700\"")
        return {c: ("listen", net.listen) for c in peers_of(config)}
    for peer in peers_of(config):
        if peer == server:
            if not net.dial:
                raise ConfigError("network.dial: a client dials the server; set e.g. dial = \"server.example:7700\"")
            out[peer] = ("dial", net.dial)
        elif peer == fed or clients.index(peer) < clients.index(me):
            if peer not in net.addresses:
                raise ConfigError(f"network.addresses.{peer}: this client dials {peer}; give its HOST:PORT")
            out[peer] = ("dial", net.addresses[peer])
        else:
            if not net.listen:
                raise ConfigError(f"network.listen: with direct hand-offs this client listens for the clients after "
                                  f"it ({peer}); set e.g. listen = \"0.0.0.0:7711\"")
            out[peer] = ("listen", net.listen)
    return out


def horizontal_of(config: PartyConfig) -> Any:
    """The :class:`~vsplit.topology.horizontal.Horizontal` every party of ``config``'s split agrees on."""
    from vsplit.topology import Horizontal, Topology

    t, m = config.topology, config.model
    if t.segments == "vanilla":
        base = Topology.vanilla(client="client", server=t.server, width=m.embedding_width)
    else:
        base = Topology.u_shaped(client="client", server=t.server,
                                 widths=(m.embedding_width, t.middle_width or m.embedding_width))
    return Horizontal(base, client="client", clients=list(t.clients))


def settings_of(config: PartyConfig) -> Any:
    """The :class:`~vsplit.horizontal.schedule.Settings` of ``config``'s ``[schedule]`` and ``[train]``."""
    from vsplit.horizontal.schedule import Settings

    s, tr = config.schedule, config.train
    extra = {}
    if "secure_aggregation" in Settings.__dataclass_fields__:
        extra["secure_aggregation"] = s.secure_aggregation
    return Settings(kind=s.kind, rounds=tr.epochs, batch_size=tr.batch_size or BATCH_SIZE, seed=tr.seed, order=s.order,
                    route=s.route, handoff=s.handoff, interleave=s.interleave, optimizer_policy=s.optimizer_policy,
                    buffer_policy=s.buffer_policy, federated_server=s.federated_server or None,
                    lr_schedule=s.lr_schedule, lr_step_at=s.lr_step_at, lr_factor=s.lr_factor, **extra)
