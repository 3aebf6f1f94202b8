"""Split training as one sans-IO machine for every party of every topology (:class:`SplitMachine`).

The names are imported on first use, so that the light modules of this package (its messages and the
compression codecs, which the config loader checks names against) load without PyTorch.
"""

from typing import TYPE_CHECKING

from vsplit.lazy import lazy_attributes

_LAZY = {
    "Plan": "vsplit.protocol.training.plan:Plan",
    "SplitMachine": "vsplit.protocol.training.machine:SplitMachine",
    "TrainingResult": "vsplit.protocol.training.machine:TrainingResult",
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

if TYPE_CHECKING:  # for type checkers and IDEs only
    from vsplit.protocol.training.machine import SplitMachine, TrainingResult
    from vsplit.protocol.training.plan import Plan

__all__ = ["Plan", "SplitMachine", "TrainingResult"]
