"""Bundled data sets, their loaders, a vertical partitioner, ready-made presets and horizontal splits.

Example:
    >>> from vsplit.datasets import load, preset
    >>> load("bank_full").shape
    (45211, 17)
    >>> preset("bank_marketing_no_duration").parties
    ('bank', 'partner')
"""

from .horizontal import HORIZONTAL, HorizontalSplit, horizontal_split
from .loaders import DATASETS, load
from .partition import partition
from .presets import PRESETS, Preset, preset

__all__ = [
    "DATASETS", "HORIZONTAL", "PRESETS", "HorizontalSplit", "Preset", "horizontal_split", "load", "partition", "preset",
]
