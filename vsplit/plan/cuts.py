"""Every candidate cut of a captured graph in one pass: what crosses, and how the model divides.

Theory of operation. A cut is a prefix of the execution order: the client runs ops ``0 .. p-1``, the server the
rest. A value crosses cut ``p`` when it is produced before ``p`` (the model's inputs count, produced at -1) and read
at or after ``p``, including by the model's output; parameters and buffers never cross. So each value crosses the
cuts ``produced < p <= last read``, and one pass over the values gives every cut. A parameter read on both sides of
a cut is shared by the two halves. A module cut ``after="layer1"`` is the cut just after the last op that ran
inside that call of ``layer1``.

Example:
    >>> crossing_positions(produced=2, last_read=5)
    range(3, 6)
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import fx

from vsplit.plan.graph import Captured


def crossing_positions(*, produced: int, last_read: int) -> range:
    """The cut positions at which a value produced at op ``produced`` and last read at ``last_read`` crosses."""
    return range(produced + 1, last_read + 1)


@dataclass(frozen=True)
class Cut:
    """One candidate cut: a position in the execution order and the names it goes by."""

    position: int
    after: str
    aliases: tuple[str, ...]


def lifetimes(captured: Captured) -> dict[fx.Node, tuple[int, int]]:
    """For every tensor value that is read: (op that produced it, last op that reads it; ``len(ops)``: the output)."""
    op_of = captured.op_of()
    end = len(captured.ops)
    result: dict[fx.Node, tuple[int, int]] = {}
    for node in captured.values:
        if node.op == "get_attr":
            continue
        produced = -1 if node.op == "placeholder" else op_of.get(node)
        if produced is None:
            continue
        reads = [end if user.op == "output" else op_of.get(user, produced) for user in node.users]
        last = max(reads, default=produced)
        if last > produced:
            result[node] = (produced, last)
    return result


def parameter_uses(captured: Captured) -> dict[str, tuple[int, int]]:
    """For every parameter the graph reads: the first and the last op that read it."""
    op_of = captured.op_of()
    params = dict(captured.root.named_parameters())
    uses: dict[str, tuple[int, int]] = {}
    for node in captured.graph.nodes:
        if node.op != "get_attr" or node.target not in params:
            continue
        readers = [op_of[user] for user in node.users if user in op_of]
        if readers:
            uses[node.target] = (min(readers), max(readers))
    return uses


def module_cuts(captured: Captured) -> list[Cut]:
    """One cut per distinct end of a module call, named by the outermost call ending there, plus the raw input."""
    ends: dict[str, int] = {}
    order: list[str] = []
    for op in captured.ops:
        for path in op.stack:
            if path not in ends:
                order.append(path)
            ends[path] = op.index
    by_position: dict[int, list[str]] = {}
    for path in sorted(order, key=lambda p: (ends[p], p.count("."), order.index(p))):
        by_position.setdefault(ends[path] + 1, []).append(path)
    cuts = [Cut(0, "(input)", ())]
    cuts += [Cut(p, names[0], tuple(names[1:])) for p, names in sorted(by_position.items())]
    return cuts


def op_cuts(captured: Captured) -> list[Cut]:
    """One cut after every op, named ``op:<index>``, with the op's node name and any module ending there as aliases."""
    modules = {cut.position: (cut.after, *cut.aliases) for cut in module_cuts(captured)}
    cuts = [Cut(0, "(input)", ())]
    for op in captured.ops:
        cuts.append(Cut(op.index + 1, f"op:{op.index}", (op.node.name, *modules.get(op.index + 1, ()))))
    return cuts
