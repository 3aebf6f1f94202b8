"""Many clients with the same columns: sequential split learning, SplitFed v1 and v2, and FedAvg, on one engine.

See docs/clients.md. ``import vsplit.horizontal`` imports torch (its machines and sessions train).

Example:
    >>> from vsplit.topology import Horizontal, Topology
    >>> h = Horizontal(Topology.u_shaped(client="client", server="cloud"), client="client", clients=["a", "b", "c"])
    >>> s = Settings(kind="splitfed_v2", interleave="client_major")
    >>> stages = compile_schedule(s, clients=h.clients, server=h.server, rows=dict.fromkeys(h.clients, 9))
    >>> print(format_schedule(stages, s))
    splitfed_v2: optimizer keep, buffers average, server order client_major, secure aggregation auto
      h00000 round 0 train a+b+c+cloud
      h00001 round 0 average a,b,c at cloud
"""

from vsplit.horizontal.run import train_horizontal
from vsplit.horizontal.schedule import Settings, Stage, compile_schedule, format_schedule, server_order, stage_plan
from vsplit.horizontal.session import ClientSide, HorizontalOutcome, ServerSide

__all__ = [
    "ClientSide",
    "HorizontalOutcome",
    "ServerSide",
    "Settings",
    "Stage",
    "compile_schedule",
    "format_schedule",
    "server_order",
    "stage_plan",
    "train_horizontal",
]
