"""Defenses as plug-ins: a config string names one (see :data:`CATALOG`); each reports its cost.

The names, and the side each runs at, are listed here without importing any implementation, so loading a party
config checks its defenses without importing PyTorch; :data:`DEFENSES`, :func:`make_defense` and the classes are
imported on first use (from :mod:`vsplit.privacy.defenses.registry`, which checks that it agrees with the list).

Example:
    >>> names()  # doctest: +NORMALIZE_WHITESPACE
    ['clip_noise', 'embedding_noise', 'gap_noise', 'label_dp', 'marvell', 'max_norm', 'none', 'nopeek',
     'secretflow_embedding_dp', 'secretflow_label_dp']
    >>> sorted(sides("clip_noise+nopeek"))
    ['feature', 'label']
    >>> from vsplit.privacy.defenses import make_defense
    >>> make_defense("secretflow_embedding_dp").noise_multiplier
    0.5
"""

from typing import TYPE_CHECKING

from vsplit.errors import ConfigError
from vsplit.lazy import lazy_attributes
from vsplit.privacy.defenses.catalog import CATALOG

_REGISTRY = "vsplit.privacy.defenses.registry"
_LAZY = {
    name: f"{_REGISTRY}:{name}"
    for name in (
        "DEFENSES", "ClipNoise", "Combined", "Defense", "EmbeddingNoise", "GapNoise", "Marvell", "MaxNorm", "NoDefense",
        "NoPeek", "RandomizedResponse", "make_defense",
    )
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

if TYPE_CHECKING:  # for type checkers and IDEs only
    from vsplit.privacy.defenses.registry import (
        DEFENSES,
        ClipNoise,
        Combined,
        Defense,
        EmbeddingNoise,
        GapNoise,
        Marvell,
        MaxNorm,
        NoDefense,
        NoPeek,
        RandomizedResponse,
        make_defense,
    )


def names() -> list[str]:
    """Every registered defense and named setting."""
    return sorted(CATALOG)


def sides(config: str) -> set[str]:
    """The sides (``"label"``, ``"feature"``) that run the defenses of a config string such as ``"a+b:k=1"``.

    Raises :class:`ConfigError` for an unknown name. Only a config with options (``name:key=value``) imports the
    implementation, to check the options; a bare name is checked against :data:`CATALOG` alone.
    """
    found = set()
    for part in config.split("+"):
        name, _, options = part.partition(":")
        entry = CATALOG.get(name.strip())
        if entry is None:
            raise ConfigError(f"unknown defense {name.strip()!r}; choose one of: {', '.join(names())}")
        found.add(entry[1])
        if options.strip():
            from vsplit.privacy.defenses.registry import make_defense

            make_defense(part)
    return found


__all__ = [
    "CATALOG",
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
    "names",
    "sides",
]
