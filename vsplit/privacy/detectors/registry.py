"""Imports every detector, so each registers its name in :data:`~vsplit.privacy.detectors.base.DETECTORS`, and
makes one from its config string (:func:`make_detector`): registration needs no import back from the base module.

Example:
    >>> DETECTORS.names()
    ['gradient_scrutinizer', 'splitguard', 'splitout']
"""

from vsplit.privacy.defenses.base import parse_options
from vsplit.privacy.detectors.base import DETECTORS, Detector
from vsplit.privacy.detectors.scrutinizer import GradientScrutinizer
from vsplit.privacy.detectors.splitguard import SplitGuard
from vsplit.privacy.detectors.splitout import SplitOut


def make_detector(config: str | Detector) -> Detector:
    """The detector a config string names: ``"name"`` or ``"name:key=value,..."``.

    Example:
        >>> make_detector("gradient_scrutinizer:threshold=0.3").threshold
        0.3
    """
    if isinstance(config, Detector):
        return config
    config = config.strip()
    name, _, options = config.partition(":")
    factory = DETECTORS.get(name.strip())
    detector = factory(**parse_options(factory, options, kind="detector", name=name.strip(), config=config))
    detector.config = config
    return detector


__all__ = ["DETECTORS", "Detector", "GradientScrutinizer", "SplitGuard", "SplitOut", "make_detector"]
