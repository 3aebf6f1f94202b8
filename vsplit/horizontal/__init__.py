"""Many clients with the same columns: sequential split learning, SplitFed v1 and v2, and FedAvg, on one engine.

See docs/clients.md. The names below are imported on first use (see :mod:`vsplit.lazy`): this front door stands
above the package's machines and schedules, which the config loader imports, so it must not import its sessions
and runners when one of them is imported. Using ``train_horizontal`` or a session imports torch.

Example:
    >>> from vsplit.horizontal import Settings, compile_schedule, format_schedule
    >>> from vsplit.topology import Horizontal, Topology
    >>> h = Horizontal(Topology.u_shaped(client="client", server="cloud"), client="client", clients=["a", "b", "c"])
    >>> s = Settings(kind="splitfed_v2", interleave="client_major")
    >>> stages = compile_schedule(s, clients=h.clients, server=h.server, rows=dict.fromkeys(h.clients, 9))
    >>> print(format_schedule(stages, s))
    splitfed_v2: optimizer keep, buffers average, server order client_major, secure aggregation auto
      h00000 round 0 train a+b+c+cloud
      h00001 round 0 average a,b,c at cloud
"""

from typing import TYPE_CHECKING

from vsplit.lazy import lazy_attributes

#: Public names imported on first use: name -> "module:attribute".
_LAZY = {
    "ClientSide": "vsplit.horizontal.session:ClientSide",
    "HorizontalOutcome": "vsplit.horizontal.session:HorizontalOutcome",
    "ServerSide": "vsplit.horizontal.session:ServerSide",
    "Settings": "vsplit.horizontal.schedule:Settings",
    "Stage": "vsplit.horizontal.schedule:Stage",
    "compile_schedule": "vsplit.horizontal.schedule:compile_schedule",
    "format_schedule": "vsplit.horizontal.schedule:format_schedule",
    "server_order": "vsplit.horizontal.schedule:server_order",
    "stage_plan": "vsplit.horizontal.schedule:stage_plan",
    "train_horizontal": "vsplit.horizontal.run:train_horizontal",
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

if TYPE_CHECKING:  # for type checkers and IDEs only
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
