"""vsplit: split learning for finance: vertical, vanilla and U-shaped splits on one engine.

The front doors: :class:`SplitClassifier` and :class:`SplitRegressor` for notebooks (scikit-learn estimators
over a dict of per-party tables, all parties in one process; ``topology=`` picks the split) and
:class:`SplitBoostClassifier` for boosted trees across the cut (:mod:`vsplit.boosting`), :class:`SplitScorecard`
for a WOE scorecard across the cut (:mod:`vsplit.scorecard`), :class:`SplitEnsemble` for split networks and trees
combined (:mod:`vsplit.ensemble`), :class:`Topology` to describe a split of your own,
``vsplit`` on the command line for pilots (one process per organization over mutual TLS), :mod:`vsplit.datasets` for
the bundled data and :mod:`vsplit.privacy` for attacks, defenses and audits.

``import vsplit`` is light: the names that need PyTorch or pandas are imported on first use (see :mod:`vsplit.lazy`).

Example:
    >>> import vsplit
    >>> sorted(vsplit.__all__)[:3]
    ['AlignmentError', 'AuthenticationError', 'CheckpointError']
"""

from typing import TYPE_CHECKING

from vsplit.errors import (
    AlignmentError,
    AuthenticationError,
    CheckpointError,
    ConfigError,
    DataError,
    ProtocolError,
    RemoteAbort,
    TransportError,
    VsplitError,
)
from vsplit.lazy import lazy_attributes
from vsplit.version import __version__

#: Public names imported on first use: name -> "module:attribute". Add new front doors here and to ``__all__``.
_LAZY = {
    "ComputeParty": "vsplit.party:ComputeParty",
    "FeatureParty": "vsplit.party:FeatureParty",
    "LabelParty": "vsplit.party:LabelParty",
    "ModelSettings": "vsplit.party:ModelSettings",
    "SplitBoostClassifier": "vsplit.boosting_estimator:SplitBoostClassifier",
    "SplitClassifier": "vsplit.estimator:SplitClassifier",
    "SplitEnsemble": "vsplit.ensemble:SplitEnsemble",
    "SplitRegressor": "vsplit.estimator:SplitRegressor",
    "SplitScorecard": "vsplit.scorecard_estimator:SplitScorecard",
    "TrainingHooks": "vsplit.estimator:TrainingHooks",
    "Topology": "vsplit.topology.graph:Topology",
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

if TYPE_CHECKING:  # for type checkers and IDEs only
    from vsplit.boosting_estimator import SplitBoostClassifier
    from vsplit.ensemble import SplitEnsemble
    from vsplit.estimator import SplitClassifier, SplitRegressor, TrainingHooks
    from vsplit.party import ComputeParty, FeatureParty, LabelParty, ModelSettings
    from vsplit.scorecard_estimator import SplitScorecard
    from vsplit.topology.graph import Topology

__all__ = [
    "AlignmentError",
    "AuthenticationError",
    "CheckpointError",
    "ComputeParty",
    "ConfigError",
    "DataError",
    "FeatureParty",
    "LabelParty",
    "ModelSettings",
    "ProtocolError",
    "RemoteAbort",
    "SplitBoostClassifier",
    "SplitClassifier",
    "SplitEnsemble",
    "SplitRegressor",
    "SplitScorecard",
    "Topology",
    "TrainingHooks",
    "TransportError",
    "VsplitError",
    "__version__",
]
