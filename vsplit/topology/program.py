"""Each party's step program: the ordered operations it runs per training step, or per validation/scoring chunk.

Theory of operation. Forward operations follow one global topological order of the segments: a party awaits the
activations of a cut just before the first of its segments that reads them, runs its segment, and sends each
outgoing cut right away. Backward operations run per *component*: a party's segments joined by local edges (or
reading the same cut) form one autograd graph, backpropagated by one call once the gradients of every cut leaving
it have arrived; then the gradients of the cuts entering it are sent. Components are visited in the reverse of a
global topological order, so every await waits only on work that some other party can always finish first:
no step program can deadlock. Within a component whose gradients go to peers, the segments no sent gradient
depends on (:func:`local_tail`, e.g. the label party's own bottom under the top) are backpropagated after the
sends (``BackwardLocal``): their readers take their outputs as leaves, so the peers start their own backward
while this party finishes its own, and the numbers are the same. A topology whose components form a cycle (a
party that sends to a chain and reads that chain's result in the same autograd graph) is refused.

Example:
    >>> from vsplit.topology.graph import Cut, Topology
    >>> t = Topology.u_shaped(client="client", server="server")
    >>> print(format_program(compile_program(t, "server")))
    AwaitActivations(head>server) Forward(middle) SendActivations(middle>client) AwaitGradients(middle>client) \
Backward(middle) SendGradients(head>server) Step
    >>> print(format_program(compile_program(t, "client", phase="eval")))
    Forward(head) SendActivations(head>server) AwaitActivations(middle>client) Forward(tail) Collect(tail)
"""

from __future__ import annotations

from dataclasses import dataclass

from vsplit.errors import ConfigError
from vsplit.topology.graph import Cut, Topology

#: Operation kinds.
AWAIT_ACT, FORWARD, SEND_ACT, LOSS, COLLECT, AWAIT_GRAD, BACKWARD, SEND_GRAD, LOCAL_BACKWARD, STEP = (
    "AwaitActivations", "Forward", "SendActivations", "Loss", "Collect", "AwaitGradients", "Backward",
    "SendGradients", "BackwardLocal", "Step",
)


@dataclass(frozen=True)
class Op:
    """One operation: a kind and its argument (a segment name, a cut id, or a component's segment names)."""

    kind: str
    arg: object = None
    label: str = ""

    def __str__(self) -> str:
        if self.label:
            return f"{self.kind}({self.label})"
        if self.arg is None:
            return self.kind
        if isinstance(self.arg, tuple):
            return f"{self.kind}({'+'.join(self.arg)})"
        return f"{self.kind}({self.arg})"


def format_program(ops: tuple[Op, ...]) -> str:
    return " ".join(str(op) for op in ops)


def components(topology: Topology) -> list[tuple[str, ...]]:
    """Every party's autograd components (segment names in topological order), in a global topological order."""
    parent = {s.name: s.name for s in topology.segments}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    owner = {s.name: s.owner for s in topology.segments}
    for s in topology.segments:
        for i in s.inputs:
            if owner[i] == s.owner:
                union(i, s.name)
    for cut in topology.cuts:
        for r in cut.readers[1:]:
            union(cut.readers[0], r)
    groups: dict[str, list[str]] = {}
    for s in topology.segments:
        groups.setdefault(find(s.name), []).append(s.name)
    comp_of = {n: root for root, names in groups.items() for n in names}
    edges: dict[str, set[str]] = {root: set() for root in groups}
    for s in topology.segments:
        for i in s.inputs:
            if comp_of[i] != comp_of[s.name]:
                edges[comp_of[i]].add(comp_of[s.name])
    order: list[str] = []
    placed: set[str] = set()
    pending = list(groups)
    while pending:
        ready = [c for c in pending if not any(c in edges[o] for o in pending if o != c)]
        if not ready:
            stuck = sorted(n for c in pending for n in groups[c])
            raise ConfigError(
                f"topology: segments {stuck} would wait on each other's gradients (a party sends to a chain and "
                "reads its result in the same autograd graph); give the reading segment its own owner or cut"
            )
        for c in ready:
            order.append(c)
            placed.add(c)
        pending = [c for c in pending if c not in placed]
    return [tuple(groups[c]) for c in order]


def local_tail(topology: Topology, comp: tuple[str, ...]) -> tuple[str, ...]:
    """The segments of ``comp`` whose backward no gradient the party sends depends on, in topological order.

    A segment is in the tail when it reads no cut, sends no cut, holds no loss, and every input it takes from its
    own component is in the tail too: gradients flow from the loss and the outgoing cuts down to the cut leaves
    without passing through it. Its backward can wait until the gradients of the cuts are sent (the peers, who wait
    for them, start their own backward sooner) and gives the same numbers (the chain rule in two calls).

    >>> from vsplit.topology.graph import Topology
    >>> t = Topology.vertical(label_party="bank", feature_parties=["insurer"])
    >>> local_tail(t, ("bank", "top"))
    ('bank',)
    """
    segments = {s.name: s for s in topology.segments}
    readers = {r for c in topology.cuts for r in c.readers}
    senders = {c.src for c in topology.cuts}
    tail: list[str] = []
    for name in comp:  # in topological order: a segment's own inputs come before it
        seg = segments[name]
        if not seg.loss and name not in readers and name not in senders and all(i in tail for i in seg.inputs):
            tail.append(name)
    return tuple(tail)


def compile_program(topology: Topology, party: str, *, phase: str = "train") -> tuple[Op, ...]:
    """The ops ``party`` runs per training step (``phase="train"``) or per evaluation/scoring chunk (``"eval"``)."""
    if phase not in ("train", "eval"):
        raise ConfigError(f"phase must be 'train' or 'eval', got {phase!r}")
    if party not in topology.parties:
        raise ConfigError(f"{party!r} owns no segment of this topology; its parties are {list(topology.parties)}")
    ops: list[Op] = []
    awaited: set[int] = set()
    cut_by_src_dst = {(c.src, c.dst): c for c in topology.cuts}
    owner = {s.name: s.owner for s in topology.segments}
    for s in topology.segments_of(party):
        for i in s.inputs:
            if owner[i] != party:
                cut = cut_by_src_dst[(i, party)]
                if cut.id not in awaited:
                    awaited.add(cut.id)
                    ops.append(Op(AWAIT_ACT, cut.id, _label(cut)))
        ops.append(Op(FORWARD, s.name))
        ops.extend(Op(SEND_ACT, c.id, _label(c)) for c in topology.cuts if c.src == s.name)
        if s.loss:
            ops.append(Op(LOSS if phase == "train" else COLLECT, s.name))
    if phase == "eval":
        return tuple(ops)
    for comp in reversed(components(topology)):
        if owner[comp[0]] != party:
            continue
        members = set(comp)
        ops.extend(Op(AWAIT_GRAD, c.id, _label(c)) for c in topology.cuts if c.src in members)
        sends = [Op(SEND_GRAD, c.id, _label(c)) for c in topology.cuts_into(party) if members & set(c.readers)]
        tail = local_tail(topology, comp) if sends else ()
        ops.append(Op(BACKWARD, tuple(n for n in comp if n not in tail)))
        ops.extend(sends)
        if tail:  # after the sends: the peers waiting for those gradients go on meanwhile
            ops.append(Op(LOCAL_BACKWARD, tail))
    ops.append(Op(STEP))
    return tuple(ops)


def _label(cut: Cut) -> str:
    return f"{cut.src}>{cut.dst}"


def describe(topology: Topology) -> str:
    """Every party's programs, as ``vsplit topology show`` prints them."""
    lines = [f"topology {topology.kind} ({topology.fingerprint()}); labels at {topology.label_owner}"]
    for c in topology.cuts:
        shapes = ", ".join("x".join(map(str, s)) for s in c.shapes)
        lines.append(f"  cut {_label(c)}: {c.src_owner}/{c.src} -> {c.dst}/{'+'.join(c.readers)}  [{shapes}]")
    for party in topology.parties:
        lines.append(f"{party}:")
        lines.append(f"  train: {format_program(compile_program(topology, party))}")
        lines.append(f"  eval:  {format_program(compile_program(topology, party, phase='eval'))}")
    return "\n".join(lines)
