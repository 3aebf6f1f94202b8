"""Detectors a client runs against a server that hijacks training: each an observer of the gradients it receives.

* ``gradient_scrutinizer``: same-label gradients must be more alike than different-label ones (Fu et al., NDSS 2023).
* ``splitguard``: canary rows with fake labels must get gradients unlike the others (Erdogan et al., WPES 2022).
* ``splitout``: gradients must not be outliers against the client's own honest warm-up (after Erdogan et al., CANS
  2024).

On detection the client stops before its next activations leave, with a :class:`~vsplit.errors.PrivacyAlarm`
naming the detector and its evidence. The names are listed here without importing PyTorch; the classes load on use.

Example:
    >>> NAMES
    ('gradient_scrutinizer', 'splitguard', 'splitout')
    >>> from vsplit.privacy.detectors import make_detector
    >>> make_detector("splitguard:start=5").start
    5
"""

from typing import TYPE_CHECKING

from vsplit.lazy import lazy_attributes

#: Every detector's config name.
NAMES = ("gradient_scrutinizer", "splitguard", "splitout")

_LAZY = {
    "DETECTORS": "vsplit.privacy.detectors.registry:DETECTORS",
    "Detection": "vsplit.privacy.detectors.base:Detection",
    "Detector": "vsplit.privacy.detectors.base:Detector",
    "GradientScrutinizer": "vsplit.privacy.detectors.scrutinizer:GradientScrutinizer",
    "SplitGuard": "vsplit.privacy.detectors.splitguard:SplitGuard",
    "SplitOut": "vsplit.privacy.detectors.splitout:SplitOut",
    "aligned": "vsplit.privacy.detectors.base:aligned",
    "gradient_features": "vsplit.privacy.detectors.splitout:gradient_features",
    "make_detector": "vsplit.privacy.detectors.registry:make_detector",
    "plant_canaries": "vsplit.privacy.detectors.splitguard:plant_canaries",
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

if TYPE_CHECKING:  # for type checkers and IDEs only
    from vsplit.privacy.detectors.base import Detection, Detector, aligned
    from vsplit.privacy.detectors.registry import DETECTORS, make_detector
    from vsplit.privacy.detectors.scrutinizer import GradientScrutinizer
    from vsplit.privacy.detectors.splitguard import SplitGuard, plant_canaries
    from vsplit.privacy.detectors.splitout import SplitOut, gradient_features

__all__ = ["DETECTORS", "NAMES", "Detection", "Detector", "GradientScrutinizer", "SplitGuard", "SplitOut", "aligned",
           "gradient_features", "make_detector", "plant_canaries"]
