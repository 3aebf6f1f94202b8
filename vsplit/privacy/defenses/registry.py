"""The full defense registry: imports every implementation (and so PyTorch) and registers the named settings.

:mod:`vsplit.privacy.defenses` lists the same names in its light :data:`~vsplit.privacy.defenses.CATALOG`, so a
config can be checked without importing this module; importing it checks that the two agree.

Example:
    >>> DEFENSES.get("secretflow_label_dp").keywords
    {'epsilon': 64.0}
"""

import functools

from vsplit.privacy.defenses.base import DEFENSES, Combined, Defense, NoDefense, make_defense
from vsplit.privacy.defenses.catalog import CATALOG
from vsplit.privacy.defenses.embedding_noise import EmbeddingNoise
from vsplit.privacy.defenses.gap_noise import GapNoise
from vsplit.privacy.defenses.gradient_noise import ClipNoise, MaxNorm
from vsplit.privacy.defenses.label_dp import RandomizedResponse
from vsplit.privacy.defenses.marvell import Marvell
from vsplit.privacy.defenses.nopeek import NoPeek

# Named settings: SecretFlow's split-learning tutorial.
DEFENSES.register("secretflow_embedding_dp")(functools.partial(EmbeddingNoise, noise_multiplier=0.5, clip=1.0))
DEFENSES.register("secretflow_label_dp")(functools.partial(RandomizedResponse, epsilon=64.0))


def _check_catalog() -> None:
    """The light catalog must name every registered defense, with the side its class declares."""
    registered = {name: getattr(DEFENSES.get(name), "func", DEFENSES.get(name)).side for name in DEFENSES.names()}
    listed = {name: side for name, (_, side) in CATALOG.items()}
    if registered != listed:
        raise RuntimeError(f"vsplit.privacy.defenses.CATALOG {listed} does not match the registry {registered}")


_check_catalog()

__all__ = [
    "DEFENSES",
    "ClipNoise",
    "Combined",
    "Defense",
    "EmbeddingNoise",
    "GapNoise",
    "Marvell",
    "MaxNorm",
    "NoDefense",
    "NoPeek",
    "RandomizedResponse",
    "make_defense",
]
