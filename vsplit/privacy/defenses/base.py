"""What every defense is: a named configuration that plugs hooks into training and reports what it costs.

A defense is configured from a string, ``"name"`` or ``"name:key=value,key=value"`` (for example
``"clip_noise:noise_multiplier=3"``), looked up in :data:`DEFENSES`. For each training run, :meth:`Defense.hooks`
builds fresh hook objects (with their own random streams, seeded from the run's seed, so a defense never draws
from a party's model randomness); after the run :meth:`Defense.stats` says what the defense did (how much noise,
how many labels flipped) and :meth:`Defense.guarantee` gives an (ε, δ) statement where one applies. The utility
cost, the test AUC lost against no defense, is measured by :func:`vsplit.privacy.audit`.

A defense whose strength is zero is *off*: it adds no hook at all, and its hook objects return their input
unchanged, so training is bit-for-bit that without the defense.

Example:
    >>> defense = make_defense("none")
    >>> defense.active, defense.hooks(feature_parties=["partner"], seed=0).gradient_hooks
    (False, ())
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch

from vsplit.errors import ConfigError
from vsplit.models.registry import Registry
from vsplit.models.seeds import derive_seed
from vsplit.privacy.accounting import Guarantee
from vsplit.protocol.training.hooks import TrainingHooks

#: Defense names -> the class (or a named setting: a factory with preset arguments).
DEFENSES: Registry[Callable[..., Defense]] = Registry("defense")


class Defense:
    """Base class: subclasses set ``name`` and ``side`` and implement :meth:`build`.

    Attributes:
        name: the registry name.
        side: who runs it, ``"label"`` (the label party) or ``"feature"`` (each feature party).
        config: the string it was made from (set by :func:`make_defense`).
    """

    name: ClassVar[str] = ""
    side: ClassVar[str] = "label"

    def __init__(self) -> None:
        self.config = self.name
        self._hooks: list[Any] = []

    @property
    def active(self) -> bool:
        """False when the defense's strength is zero: it then adds no hook."""
        return True

    def hooks(self, *, feature_parties: Sequence[str], seed: int) -> TrainingHooks:
        """Fresh hooks for one training run against ``feature_parties``, seeded from ``seed``."""
        self._hooks = []
        if not self.active:
            return TrainingHooks()
        return self.build(feature_parties=list(feature_parties), seed=seed)

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        raise NotImplementedError

    def stats(self) -> dict[str, float]:
        """What the last run's hooks did, averaged over their calls (empty if the defense is off)."""
        merged: dict[str, list[float]] = {}
        for hook in self._hooks:
            for key, value in getattr(hook, "stats", dict)().items():
                merged.setdefault(key, []).append(value)
        return {key: float(sum(v) / len(v)) for key, v in merged.items()}

    def guarantee(self, *, n_train: int, batch_size: int, epochs: int, delta: float) -> Guarantee | None:
        """An (ε, δ) statement for a run of ``epochs`` epochs, or None where no such statement applies."""
        return None

    def generator(self, seed: int, *names: str) -> torch.Generator:
        """A private torch random stream for one hook of one run."""
        return torch.Generator().manual_seed(derive_seed(seed, "defense", self.name, *names) % 2**63)

    def __repr__(self) -> str:
        return f"<defense {self.config}>"


@DEFENSES.register("none")
class NoDefense(Defense):
    """No defense: the baseline every other setting is compared with."""

    name = "none"

    @property
    def active(self) -> bool:
        return False


class Combined(Defense):
    """Several defenses at once (``"a+b"``); their hooks run in the order given."""

    name = "combined"

    def __init__(self, parts: Sequence[Defense]) -> None:
        super().__init__()
        self.parts = list(parts)
        self.side = "+".join(sorted({p.side for p in self.parts}))  # type: ignore[misc]

    @property
    def active(self) -> bool:
        return any(p.active for p in self.parts)

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        from vsplit.privacy.hooks import merge_hooks

        return merge_hooks(*(p.hooks(feature_parties=feature_parties, seed=seed) for p in self.parts))

    def stats(self) -> dict[str, float]:
        return {f"{p.name}.{k}": v for p in self.parts for k, v in p.stats().items()}

    def guarantee(self, **kwargs: Any) -> Guarantee | None:
        found = [g for p in self.parts if (g := p.guarantee(**kwargs)) is not None]
        return found[0] if len(found) == 1 else None


def _value(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("inf", "infinity"):
        return math.inf
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip()


def make_defense(config: str | Defense) -> Defense:
    """The defense a config string names: ``"name"``, ``"name:key=value,..."``, or several joined by ``+``.

    Example:
        >>> make_defense("clip_noise:noise_multiplier=2").noise_multiplier
        2
        >>> make_defense("clip_noise:sigma=2")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        vsplit.errors.ConfigError: defense 'clip_noise' has no option 'sigma'; valid options: centred, clip_norm, ...
    """
    if isinstance(config, Defense):
        return config
    config = config.strip()
    if "+" in config:
        combined = Combined([make_defense(part) for part in config.split("+")])
        combined.config = config
        return combined
    name, _, options = config.partition(":")
    factory = DEFENSES.get(name.strip())
    defense = factory(**parse_options(factory, options, kind="defense", name=name.strip(), config=config))
    defense.config = config
    return defense


def parse_options(factory: Callable[..., Any], options: str, *, kind: str, name: str, config: str) -> dict[str, Any]:
    """The keyword arguments ``key=value,...`` of a config string, checked against ``factory``'s keyword-only
    parameters (a named setting may be a ``functools.partial``); numbers, booleans and ``inf`` are converted."""
    target = factory.func if hasattr(factory, "func") else factory  # a named setting is a functools.partial
    valid = sorted(p.name for p in inspect.signature(target).parameters.values() if p.kind == p.KEYWORD_ONLY)
    kwargs: dict[str, Any] = {}
    for item in filter(None, (o.strip() for o in options.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"{kind} option {item!r} in {config!r} needs the form key=value")
        if key not in valid:
            raise ConfigError(f"{kind} {name!r} has no option {key!r}; valid options: {', '.join(valid) or '(none)'}")
        kwargs[key] = _value(value)
    return kwargs
