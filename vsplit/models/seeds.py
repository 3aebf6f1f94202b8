"""Derive independent, reproducible seeds from one user seed and a few names.

Example:
    >>> derive_seed(0, "bank", "init") == derive_seed(0, "bank", "init")
    True
    >>> derive_seed(0, "bank", "init") != derive_seed(0, "partner", "init")
    True
"""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *names: str) -> int:
    """A 62-bit seed that depends on ``seed`` and ``names`` only."""
    digest = hashlib.sha256(repr((int(seed), *names)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2
