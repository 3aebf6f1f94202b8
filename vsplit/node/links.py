"""How a party reaches each peer, for every topology, and the mutual-TLS channels that follow.

A party's links are a plan, ``peer -> ("listen" | "dial", HOST:PORT)``, read from its config: in a vertical,
vanilla or U-shaped split the hub (the label party; the compute server of a U-shaped split) listens for every peer
and the others dial it; in a horizontal split the clients dial the server (and the clients before them, with direct
hand-offs) and the server listens (:func:`vsplit.config.horizontal.links`). :func:`open_links` opens them all the
same way: dial first, then listen. With ``network.reconnect_timeout_s`` above 0 the channels survive dropped
connections (:mod:`vsplit.transport.reconnect`): a dialer redials, a listener keeps its socket open.

Example:
    >>> parse_address("127.0.0.1:7700", key="network.listen")
    ('127.0.0.1', 7700)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vsplit.config import PartyConfig, resolve
from vsplit.errors import ConfigError

Plan = dict[str, tuple[str, str]]


def is_hub(config: PartyConfig) -> bool:
    """Whether this party of a vertical, vanilla or U-shaped split listens (the label party; U-shaped: the compute
    server)."""
    return config.party.role == ("compute" if config.topology.kind == "u_shaped" else "label")


def plan_links(config: PartyConfig, peers: Iterable[str] | None = None) -> Plan:
    """This party's links, ``peer -> (how, address)``; ``peers`` keeps only those. A :class:`ConfigError` names the
    missing key."""
    net = config.network
    if config.topology.kind == "horizontal":
        from vsplit.config.horizontal import links

        plan = links(config)
    elif is_hub(config):
        if not net.listen:
            raise ConfigError(f"network.listen: {config.party.name} listens for its peers; set e.g. "
                              "listen = \"0.0.0.0:7700\"")
        plan = {peer: ("listen", net.listen) for peer in net.peers}
    else:
        if len(net.peers) != 1:
            raise ConfigError(f"network.peers: {config.party.name} dials, and a dialing party connects to exactly one "
                              "peer (the hub), got "
                              f"{sorted(net.peers)}")
        if not net.dial:
            raise ConfigError(f"network.dial: {config.party.name} dials {next(iter(net.peers))}; set e.g. "
                              "dial = \"bank.example:7700\"")
        plan = {peer: ("dial", net.dial) for peer in net.peers}
    if peers is not None:
        wanted = list(peers)
        plan = {p: plan[p] for p in wanted if p in plan}
    for how, address in plan.values():
        parse_address(address, key="network.listen" if how == "listen" else "network.dial")
    return plan


def parse_address(text: str, *, key: str) -> tuple[str, int]:
    """``HOST:PORT`` as a ``(host, port)`` pair, or a :class:`ConfigError` naming ``key``."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"{key}: {text!r} is not HOST:PORT")
    return host, int(port)


def admission_policy(config: PartyConfig) -> Any:
    """The listener's limits before the TLS handshake (``network.allow_from``, ``network.first_record_timeout_s``)."""
    from vsplit.transport.admission import AdmissionPolicy

    net = config.network
    return AdmissionPolicy(allow=tuple(net.allow_from), first_record_s=net.first_record_timeout_s)


def open_links(config: PartyConfig, plan: Mapping[str, tuple[str, str]], *, readmit: bool = False,
               patient: bool = False) -> tuple[dict[str, Any], Any]:
    """Open a mutual-TLS channel per link of ``plan``: ``(channels, standing listener or None)``.

    ``readmit``: the listener hands over the new channels of peers that were lost and came back (a restarted client,
    :mod:`vsplit.horizontal.readmit`); ``patient``: a dialer waits while the peer still holds this party's earlier
    session."""
    from vsplit.transport.connect import Listener, dial
    from vsplit.transport.pinning import Credentials
    from vsplit.transport.reconnect import StandingListener, dial_resumable
    from vsplit.transport.resume import ResumeOptions
    from vsplit.transport.stream import ChannelOptions

    net, me = config.network, config.party.name
    resume = ResumeOptions(timeout_s=net.reconnect_timeout_s) if net.reconnect_timeout_s > 0 else None
    options = ChannelOptions(max_frame=net.max_frame_mb << 20)
    pins = {p: resolve(config, path) for p, path in net.peers.items()}
    own = {"own_cert": resolve(config, net.cert), "own_key": resolve(config, net.key)}
    channels: dict[str, Any] = {}
    standing = None
    try:
        for peer, (how, address) in plan.items():
            if how != "dial":
                continue
            if peer not in pins:
                raise ConfigError(f"network.peers.{peer}: {me} dials {peer}; pin its certificate")
            creds = Credentials.load(me, peers={peer: pins[peer]}, **own)
            where = {"peer": peer, "address": parse_address(address, key="network.dial"),
                     "deadline_s": net.connect_timeout_s, "options": options}
            channels[peer] = (dial_resumable(creds, **where, resume=resume, patient=patient) if resume
                              else dial(creds, **where))
        listen = [p for p, (how, _) in plan.items() if how == "listen"]
        if listen:
            creds = Credentials.load(me, peers={p: pins[p] for p in listen}, **own)
            address = parse_address(plan[listen[0]][1], key="network.listen")
            if resume is not None:  # open until every channel is closed: a dropped peer may come back
                standing = StandingListener(creds, address=address, options=options, resume=resume, readmit=readmit,
                                            admission=admission_policy(config))
                channels.update(standing.accept_all(deadline_s=net.connect_timeout_s))
            else:
                with Listener(creds, address=address, options=options,
                              admission=admission_policy(config)) as listener:
                    channels.update(listener.accept_all(deadline_s=net.connect_timeout_s))
    except BaseException:
        for channel in channels.values():
            channel.close()
        raise
    return channels, standing
