"""Default modules for the segments a user did not bring: merges/heads after a cut, the U-shaped middle and tail.

Each default module is created under its own seed, derived from the run seed and the segment (never from where the
segment is placed), so a topology and the same topology placed on one party start from identical weights.

Example:
    >>> from vsplit.topology import Topology
    >>> t = Topology.u_shaped(client="bank", server="cloud", widths=(16, 8))
    >>> m = default_segment(t, t.segment("middle"), hidden=(32,), merge="concat", task_width=1, seed=0)
    >>> type(m).__name__, m.out_dim
    ('MLP', 8)
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from vsplit.errors import ConfigError
from vsplit.models.ensemble import EnsembleTop
from vsplit.models.rng import PartyRng
from vsplit.models.seeds import derive_seed
from vsplit.models.segments import MLP
from vsplit.models.top import TopModel
from vsplit.topology.graph import Segment, Topology


def segment_seed(topology: Topology, segment: Segment, seed: int) -> int:
    """The initialisation seed of ``segment``: sources by their name, the vertical top as it always was."""
    if segment.is_source:
        return derive_seed(seed, segment.name, "init")
    if segment.name == "top":
        return derive_seed(seed, topology.label_owner, "top")
    return derive_seed(seed, segment.name, "init")


def input_widths(topology: Topology, segment: Segment) -> dict[str, int]:
    """The flat width of each input of ``segment`` (its upstream segments must declare one-tensor 1-D shapes)."""
    widths = {}
    for name in segment.inputs:
        shapes = topology.segment(name).shapes
        if len(shapes) != 1 or len(shapes[0]) != 1:
            raise ConfigError(
                f"segment {segment.name!r}: input {name!r} has shapes {shapes}; a default module needs one flat "
                f"tensor per input; bring your own module for {segment.name!r}"
            )
        widths[name] = shapes[0][0]
    return widths


def default_segment(
    topology: Topology,
    segment: Segment,
    *,
    hidden: Sequence[int],
    merge: str,
    task_width: int,
    seed: int,
    dropout: float = 0.0,
    members: int = 1,
) -> nn.Module:
    """A default module for a non-source segment.

    The loss segment of a vertical or vanilla split is a :class:`TopModel` (merge, then an MLP); a segment whose
    output crosses a cut is an :class:`MLP` ending in a ReLU (the U-shaped middle); the U-shaped tail is a linear
    layer after a ReLU. ``members`` > 1 makes that top an :class:`~vsplit.models.ensemble.EnsembleTop`.
    """
    if segment.is_source:
        raise ConfigError(f"segment {segment.name!r} is fed with rows: its module comes from the party's table")
    widths = input_widths(topology, segment)
    with PartyRng(segment_seed(topology, segment, seed)):
        if segment.loss and (len(widths) > 1 or segment.name == "top"):
            if members > 1:
                return EnsembleTop(widths=widths, members=members, merge=merge, hidden=hidden, dropout=dropout,
                                   out_dim=task_width)
            return TopModel(widths=widths, merge=merge, hidden=hidden, dropout=dropout, out_dim=task_width)
        (width,) = widths.values() if len(widths) == 1 else (sum(widths.values()),)
        if segment.loss:
            return nn.Sequential(nn.ReLU(), nn.Linear(width, task_width))
        (out,) = segment.shapes
        return MLP(width, hidden=hidden, out_dim=out[0], dropout=dropout, final_activation=True)
