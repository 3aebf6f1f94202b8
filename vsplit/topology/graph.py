"""A split as data: segments, each owned by one party, joined by edges; an edge between two owners is a cut.

Theory of operation. A :class:`Topology` is a small DAG of :class:`Segment` objects. A segment with no inputs is a
*source*: its owner feeds it its own rows. Exactly one segment is the *loss* segment: its output meets the labels,
so its owner holds them and coordinates training (plan, validation, early stopping). Where a segment's output is
read by a segment of another party, the output crosses a :class:`Cut` (activations forward, their gradients back);
a cut carries every tensor of the segment's output (``shapes``: one per-sample shape per tensor), once per receiving
party, however many of that party's segments read it.

Everything here is pure data: no torch. The topology is validated when it is built (names, owners, acyclic, exactly
one loss, a declared shape for every output that crosses a cut) and fingerprinted, so parties configured with
different topologies refuse each other before training starts.

Example:
    >>> t = Topology.u_shaped(client="bank", server="cloud", widths=(16, 8))
    >>> [s.name for s in t.segments], t.label_owner
    (['head', 'middle', 'tail'], 'bank')
    >>> [(c.src, c.dst) for c in t.cuts]
    [('head', 'cloud'), ('middle', 'bank')]
    >>> t.placed_on("bank").cuts
    ()
    >>> t.fingerprint() == Topology.u_shaped(client="bank", server="cloud", widths=(16, 8)).fingerprint()
    True
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from vsplit.errors import ConfigError

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Segment:
    """One part of the network, owned by one party.

    Attributes:
        name: unique within the topology ("partner", "head", "top").
        owner: the party that holds its weights (and, for a source, the rows).
        inputs: upstream segment names; ``()`` means the owner's own rows.
        loss: its output meets the labels (exactly one segment has this).
        shapes: per-sample shape of each output tensor; needed where the output crosses a cut.
    """

    name: str
    owner: str
    inputs: tuple[str, ...] = ()
    loss: bool = False
    shapes: tuple[Shape, ...] = ()

    @property
    def is_source(self) -> bool:
        return not self.inputs


@dataclass(frozen=True)
class Cut:
    """The output of segment ``src`` (owned by ``src_owner``) crossing to party ``dst``, read there by ``readers``."""

    id: int
    src: str
    src_owner: str
    dst: str
    readers: tuple[str, ...]
    shapes: tuple[Shape, ...]


@dataclass(frozen=True)
class Topology:
    """A validated split: segments in topological order, and the cuts between owners.

    Build one with a constructor (:meth:`vertical`, :meth:`vanilla`, :meth:`u_shaped`) or from your own segments.
    """

    segments: tuple[Segment, ...]
    kind: str = "custom"
    cuts: tuple[Cut, ...] = field(init=False)

    def __post_init__(self) -> None:
        ordered = _validate(self.segments)
        object.__setattr__(self, "segments", ordered)
        object.__setattr__(self, "cuts", _cuts(ordered))

    # -- views -------------------------------------------------------------------------------------------------------
    @property
    def parties(self) -> tuple[str, ...]:
        """Every owner, in order of first appearance."""
        return tuple(dict.fromkeys(s.owner for s in self.segments))

    @property
    def loss_segment(self) -> Segment:
        return next(s for s in self.segments if s.loss)

    @property
    def label_owner(self) -> str:
        """The party holding the labels: it coordinates training."""
        return self.loss_segment.owner

    def segment(self, name: str) -> Segment:
        for s in self.segments:
            if s.name == name:
                return s
        raise ConfigError(f"topology has no segment {name!r}; it has {[s.name for s in self.segments]}")

    def segments_of(self, party: str) -> tuple[Segment, ...]:
        return tuple(s for s in self.segments if s.owner == party)

    def sources_of(self, party: str) -> tuple[Segment, ...]:
        """The segments ``party`` feeds with its own rows."""
        return tuple(s for s in self.segments_of(party) if s.is_source)

    def cuts_into(self, party: str) -> tuple[Cut, ...]:
        return tuple(c for c in self.cuts if c.dst == party)

    def cuts_out_of(self, party: str) -> tuple[Cut, ...]:
        return tuple(c for c in self.cuts if c.src_owner == party)

    def peers_of(self, party: str) -> tuple[str, ...]:
        """The parties ``party`` exchanges messages with: its cut neighbours, plus the coordinator (or, at the
        coordinator, everyone)."""
        if party == self.label_owner:
            return tuple(p for p in self.parties if p != party)
        near = {c.dst for c in self.cuts_out_of(party)} | {c.src_owner for c in self.cuts_into(party)}
        near.add(self.label_owner)
        return tuple(p for p in self.parties if p in near and p != party)

    def row_holders(self) -> tuple[str, ...]:
        """Parties whose rows must be aligned: the owners of sources, and the label owner."""
        holders = {s.owner for s in self.segments if s.is_source} | {self.label_owner}
        return tuple(p for p in self.parties if p in holders)

    def alignment_groups(self) -> list[frozenset[str]]:
        """Who runs PSI with whom: all row holders together, or nobody when one party holds every row (U-shaped)."""
        holders = self.row_holders()
        return [frozenset(holders)] if len(holders) > 1 else []

    # -- derived topologies ------------------------------------------------------------------------------------------
    def placed_on(self, party: str) -> Topology:
        """The same segments, all owned by ``party``: no cut at all (the centralized baseline and the oracle)."""
        return Topology(tuple(replace(s, owner=party) for s in self.segments), kind=f"{self.kind}@{party}")

    # -- identity ----------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "segments": [
                {"name": s.name, "owner": s.owner, "inputs": list(s.inputs), "loss": s.loss,
                 "shapes": [list(x) for x in s.shapes]}
                for s in self.segments
            ],
        }

    def fingerprint(self) -> str:
        """A short hex digest of the whole topology (every segment, owner, edge and shape)."""
        return _digest(self.to_dict())

    def view_fingerprint(self, party: str) -> str:
        """A digest of what ``party`` must agree on: its segments and every cut that touches it.

        A partner in a vertical split knows only itself and the label party; its view fingerprint still equals the
        label party's fingerprint of that partner's view, and differs as soon as a width, a name or the kind does.

        >>> full = Topology.vertical(label_party="bank", feature_parties=["shop", "telco"])
        >>> mine = Topology.vertical(label_party="bank", feature_parties=["shop"])
        >>> full.view_fingerprint("shop") == mine.view_fingerprint("shop"), full.fingerprint() == mine.fingerprint()
        (True, False)
        """
        own = [s for s in self.segments if s.owner == party]
        return _digest({
            "kind": self.kind,
            "labels": self.label_owner,
            "segments": [[s.name, list(s.inputs), s.loss, [list(x) for x in s.shapes]] for s in own],
            "cuts": [[c.id, c.src, c.src_owner, c.dst, list(c.readers), [list(x) for x in c.shapes]]
                     for c in self.cuts if party in (c.src_owner, c.dst)],
        })

    # -- constructors ------------------------------------------------------------------------------------------------
    @classmethod
    def vertical(
        cls,
        *,
        label_party: str,
        feature_parties: Sequence[str],
        label_has_features: bool = True,
        width: int | Mapping[str, int] = 16,
    ) -> Topology:
        """K feature parties' bottoms (segments named after their party) feeding the label party's ``top``.

        ``feature_parties=[]`` with ``label_has_features=True`` is the label-party-only baseline.

        >>> Topology.vertical(label_party="bank", feature_parties=["shop", "telco"]).parties
        ('bank', 'shop', 'telco')
        """
        widths = dict(width) if isinstance(width, Mapping) else {}
        default = width if isinstance(width, int) else 16
        bottoms = ([label_party] if label_has_features else []) + list(feature_parties)
        if not bottoms:
            raise ConfigError("a vertical topology needs at least one party with features")
        segments = [Segment(p, p, (), False, ((widths.get(p, default),),)) for p in bottoms]
        segments.append(Segment("top", label_party, tuple(bottoms), loss=True))
        return cls(tuple(segments), kind="vertical")

    @classmethod
    def vanilla(cls, *, client: str, server: str, width: int = 16) -> Topology:
        """The client runs the layers before the cut (``bottom``) on its rows; the server the rest (``top``) with
        the labels.

        >>> [c.dst for c in Topology.vanilla(client="owner", server="lab").cuts]
        ['lab']
        """
        return cls(
            (Segment("bottom", client, (), False, ((width,),)), Segment("top", server, ("bottom",), loss=True)),
            kind="vanilla",
        )

    @classmethod
    def u_shaped(cls, *, client: str, server: str, widths: tuple[int, int] = (16, 16)) -> Topology:
        """The client keeps ``head`` and ``tail`` and the labels; the server runs only the ``middle``: it never sees
        rows, labels or predictions."""
        head, middle = widths
        return cls(
            (
                Segment("head", client, (), False, ((head,),)),
                Segment("middle", server, ("head",), False, ((middle,),)),
                Segment("tail", client, ("middle",), loss=True),
            ),
            kind="u_shaped",
        )


def _validate(segments: Sequence[Segment]) -> tuple[Segment, ...]:
    """Check names, edges, the one loss and acyclicity; return the segments in a stable topological order."""
    if not segments:
        raise ConfigError("a topology needs at least one segment")
    names = [s.name for s in segments]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"topology: segment names must be unique, repeated: {dupes}")
    by_name = {s.name: s for s in segments}
    for s in segments:
        if not s.name or not s.owner:
            raise ConfigError(f"topology: every segment needs a name and an owner, got {s!r}")
        for i in s.inputs:
            if i not in by_name:
                raise ConfigError(f"topology: segment {s.name!r} reads {i!r}, which is not a segment")
        for shape in s.shapes:
            if not shape or any(not isinstance(d, int) or d < 1 for d in shape):
                raise ConfigError(f"topology: segment {s.name!r} has an invalid output shape {shape}")
    losses = [s.name for s in segments if s.loss]
    if len(losses) != 1:
        raise ConfigError(f"topology: exactly one segment must have the loss, found {losses or 'none'}")
    readers: dict[str, list[Segment]] = {n: [] for n in names}
    for s in segments:
        for i in s.inputs:
            readers[i].append(s)
    if readers[losses[0]]:
        raise ConfigError(f"topology: the loss segment {losses[0]!r} must not feed other segments")
    for s in segments:
        if not s.loss and not readers[s.name]:
            raise ConfigError(f"topology: segment {s.name!r} feeds nothing and is not the loss segment")
        if any(r.owner != s.owner for r in readers[s.name]) and not s.shapes:
            raise ConfigError(f"topology: segment {s.name!r} crosses a cut, so it must declare its output shapes")
    ordered: list[Segment] = []
    placed: set[str] = set()
    pending = list(segments)
    while pending:
        ready = [s for s in pending if all(i in placed for i in s.inputs)]
        if not ready:
            raise ConfigError(f"topology: the segments {[s.name for s in pending]} form a cycle")
        for s in ready:
            ordered.append(s)
            placed.add(s.name)
        pending = [s for s in pending if s.name not in placed]
    return tuple(ordered)


def _digest(tree: object) -> str:
    return hashlib.sha256(json.dumps(tree, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def cut_id(src: str, dst: str) -> int:
    """A cut's id: derived from its segment and receiving party, so a party that knows only its own part of a
    topology numbers its cuts as the others do."""
    return zlib.crc32(f"{src}>{dst}".encode()) & 0x7FFFFFFF


def _cuts(segments: Sequence[Segment]) -> tuple[Cut, ...]:
    cuts: list[Cut] = []
    for s in segments:
        by_party: dict[str, list[str]] = {}
        for r in segments:
            if s.name in r.inputs and r.owner != s.owner:
                by_party.setdefault(r.owner, []).append(r.name)
        for party, names in by_party.items():
            cuts.append(Cut(cut_id(s.name, party), s.name, s.owner, party, tuple(names), s.shapes))
    if len({c.id for c in cuts}) != len(cuts):
        raise ConfigError("topology: two cuts hash to the same id; rename a segment")
    return tuple(cuts)
