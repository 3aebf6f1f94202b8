"""Imports every detector, so each registers its name in :data:`~vsplit.privacy.detectors.base.DETECTORS`.

Example:
    >>> DETECTORS.names()
    ['gradient_scrutinizer', 'splitguard', 'splitout']
"""

from vsplit.privacy.detectors.base import DETECTORS, Detector, make_detector
from vsplit.privacy.detectors.scrutinizer import GradientScrutinizer
from vsplit.privacy.detectors.splitguard import SplitGuard
from vsplit.privacy.detectors.splitout import SplitOut

__all__ = ["DETECTORS", "Detector", "GradientScrutinizer", "SplitGuard", "SplitOut", "make_detector"]
