"""One organization's process, for every topology: :class:`PartyNode` (``vsplit train``, ``vsplit predict``).

``PartyNode(config)`` is the node of the config's topology: :class:`~vsplit.node.aligned.AlignedNode` (vertical,
vanilla, U-shaped) or :class:`~vsplit.node.horizontal.HorizontalNode` (sequential, SplitFed, FedAvg); with
``[model] kind = "boosting"``, :class:`~vsplit.node.boost.BoostNode` (vertical boosted trees); with ``kind =
"scorecard"``, :class:`~vsplit.node.scorecard.ScorecardNode`; with ``kind = "ensemble"``,
:class:`~vsplit.node.ensemble.EnsembleNode` (networks and trees, combined by the label party). Importing the
package registers every program.
"""

from vsplit.node import aligned, boost, ensemble, horizontal, scorecard  # noqa: F401  (each registers the kinds it runs)
from vsplit.node.node import PartyNode, session_id

__all__ = ["PartyNode", "session_id"]
