"""The topology a party config describes, as every party of the split must agree on it.

A party knows the parties it talks to: the hub (the label party, or the U-shaped server) knows everyone; a partner
knows itself and the hub. What must agree is each party's *view* (its segments and the cuts that touch it, see
:meth:`~vsplit.topology.graph.Topology.view_fingerprint`), which both sides compute from their own configs.

Example:
    >>> from vsplit.config.schema import *
    >>> net = NetworkSection(key="k", cert="c", peers={"shop": "s.pem", "telco": "t.pem"}, listen="0.0.0.0:1")
    >>> config = PartyConfig(party=PartySection(name="bank", role="label"), network=net)
    >>> topology_of(config).parties
    ('bank', 'shop', 'telco')
"""

from __future__ import annotations

from vsplit.config.schema import PartyConfig
from vsplit.errors import ConfigError
from vsplit.topology.graph import Topology


def topology_of(config: PartyConfig, *, label_has_features: bool | None = None) -> Topology:
    """The topology of ``config``'s split (the hub's full one; a partner's own part of it).

    ``label_has_features``: whether the label party's table has feature columns (default: unless ``data.features``
    is an empty list); the party process knows it from its table."""
    t, party, m = config.topology, config.party, config.model
    peers = list(config.network.peers)
    width = m.embedding_width
    if t.kind == "vertical":
        if party.role == "label":
            features = list(t.feature_parties) if t.feature_parties is not None else peers
            widths = {p: m.peer_widths.get(p, width) for p in features} | {party.name: width}
            return Topology.vertical(label_party=party.name, feature_parties=features,
                                     label_has_features=_has_features(config) if label_has_features is None
                                     else label_has_features, width=widths)
        (hub,) = peers
        return Topology.vertical(label_party=hub, feature_parties=[party.name], width={party.name: width})
    if t.kind == "vanilla":
        if party.role == "label":
            (client,) = peers if len(peers) == 1 else (None,)
            if client is None:
                raise ConfigError(f"{config.source}: a vanilla split has one client; network.peers names {peers}")
            return Topology.vanilla(client=client, server=party.name, width=width)
        (hub,) = peers
        return Topology.vanilla(client=party.name, server=hub, width=width)
    if t.kind == "u_shaped":
        middle = t.middle_width or width
        if party.role == "compute":
            (client,) = peers if len(peers) == 1 else (None,)
            if client is None:
                raise ConfigError(f"{config.source}: a U-shaped server serves one client; network.peers names {peers}")
            return Topology.u_shaped(client=client, server=party.name, widths=(width, middle))
        (hub,) = peers
        return Topology.u_shaped(client=party.name, server=hub, widths=(width, middle))
    if t.kind == "horizontal":
        raise ConfigError(f"{config.source}: a horizontal config (many banks with the same columns) runs with `vsplit "
                          "run --config` and `vsplit predict --config`: its banks' rows need no PSI (docs/clients.md)")
    raise ConfigError(f"{config.source}: topology.kind {t.kind!r} is not one of vertical, vanilla, u_shaped")


def _has_features(config: PartyConfig) -> bool:
    """Whether the label party's table has feature columns (features listed, or columns beyond ID and label)."""
    d = config.data
    if d.features is not None:
        return bool(d.features)
    return True
