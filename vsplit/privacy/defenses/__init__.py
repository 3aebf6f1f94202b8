"""Defenses as plug-ins: a config string names one (see :data:`DEFENSES`); each reports its cost.

Example:
    >>> names()  # doctest: +NORMALIZE_WHITESPACE
    ['clip_noise', 'embedding_noise', 'label_dp', 'marvell', 'max_norm', 'none', 'nopeek',
     'secretflow_embedding_dp', 'secretflow_label_dp']
    >>> make_defense("secretflow_embedding_dp").noise_multiplier
    0.5
"""

import functools

from vsplit.privacy.defenses.base import DEFENSES, Combined, Defense, NoDefense, make_defense
from vsplit.privacy.defenses.embedding_noise import EmbeddingNoise
from vsplit.privacy.defenses.gradient_noise import ClipNoise, MaxNorm
from vsplit.privacy.defenses.label_dp import RandomizedResponse
from vsplit.privacy.defenses.marvell import Marvell
from vsplit.privacy.defenses.nopeek import NoPeek

# Named settings: SecretFlow's split-learning tutorial.
DEFENSES.register("secretflow_embedding_dp")(functools.partial(EmbeddingNoise, noise_multiplier=0.5, clip=1.0))
DEFENSES.register("secretflow_label_dp")(functools.partial(RandomizedResponse, epsilon=64.0))


def names() -> list[str]:
    """Every registered defense and named setting."""
    return DEFENSES.names()


__all__ = [
    "DEFENSES",
    "ClipNoise",
    "Combined",
    "Defense",
    "EmbeddingNoise",
    "Marvell",
    "MaxNorm",
    "NoDefense",
    "NoPeek",
    "RandomizedResponse",
    "make_defense",
    "names",
]
