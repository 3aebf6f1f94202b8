"""Derive independent, reproducible seeds from one user seed and a few names.

Example:
    >>> derive_seed(0, "bank", "init") == derive_seed(0, "bank", "init")
    True
    >>> derive_seed(0, "bank", "init") != derive_seed(0, "partner", "init")
    True
    >>> [network_seed(7, i) for i in range(3)]
    [7, 1007, 2007]
"""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *names: str) -> int:
    """A 62-bit seed that depends on ``seed`` and ``names`` only."""
    digest = hashlib.sha256(repr((int(seed), *names)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2


#: network ``i`` of a bag (:class:`vsplit.bagging.SplitBag`, ``train.networks``) is seeded ``seed + SEED_STRIDE * i``
SEED_STRIDE = 1000


def network_seed(seed: int, index: int) -> int:
    """The seed of network ``index`` of a bag whose run seed is ``seed`` (network 0: ``seed`` itself)."""
    return int(seed) + SEED_STRIDE * int(index)
