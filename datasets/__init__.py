"""Bundled data sets, their loaders, a vertical partitioner and ready-made presets (``vsplit.datasets``).

Example:
    >>> from vsplit.datasets import load, preset
    >>> load("bank_full").shape
    (45211, 17)
    >>> preset("bank_marketing_no_duration").parties
    ('bank', 'partner')
"""

from .loaders import DATASETS, load
from .partition import partition
from .presets import PRESETS, Preset, preset

__all__ = ["DATASETS", "PRESETS", "Preset", "load", "partition", "preset"]
