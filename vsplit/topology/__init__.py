"""Topologies as data: segments, cuts and each party's step program (pure; no torch).

Example:
    >>> from vsplit.topology import Topology, describe
    >>> vertical = Topology.vertical(label_party="bank", feature_parties=["partner"])
    >>> "cut partner>bank: partner/partner -> bank/top" in describe(vertical)
    True
"""

from vsplit.topology.graph import Cut, Segment, Topology
from vsplit.topology.horizontal import Horizontal
from vsplit.topology.program import Op, compile_program, describe, format_program

__all__ = ["Cut", "Horizontal", "Op", "Segment", "Topology", "compile_program", "describe", "format_program"]
