"""vsplit: vertical split learning for finance.

The front doors: :class:`SplitClassifier` for notebooks (all parties in one process), ``vsplit`` on the command line
for pilots (one process per organization over mutual TLS), :mod:`vsplit.datasets` for the bundled data and
:mod:`vsplit.privacy` for attacks, defenses and audits.

Example:
    >>> import vsplit
    >>> sorted(vsplit.__all__)[:3]
    ['AlignmentError', 'AuthenticationError', 'CheckpointError']
"""

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
from vsplit.estimator import SplitClassifier, TrainingHooks
from vsplit.party import FeatureParty, LabelParty, ModelSettings

__version__ = "0.1.0"

__all__ = [
    "AlignmentError",
    "AuthenticationError",
    "CheckpointError",
    "ConfigError",
    "DataError",
    "FeatureParty",
    "LabelParty",
    "ModelSettings",
    "ProtocolError",
    "RemoteAbort",
    "SplitClassifier",
    "TrainingHooks",
    "TransportError",
    "VsplitError",
    "__version__",
]
