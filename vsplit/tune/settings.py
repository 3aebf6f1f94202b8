"""A party's ``[tune]`` table: its checks, the label party's search space, a partner's bounds, and how a trial's
values become a party's config.

The label party's ``space`` narrows the knobs it searches (``knob = [low, high]``, or the choices of
``numeric_embedding``; empty: :data:`~vsplit.tune.space.SPACE`); a partner's ``bounds`` say which values it accepts
for any knob (each knob but ``top_width`` governs what leaves it). Both must lie within vsplit's hard
:data:`~vsplit.tune.space.LIMITS`, which every partner applies even to the knobs its config leaves open. A trial's
values map onto config keys (:func:`overrides`) the same way at every party, so the trial trains what the best config
will say.

Example:
    >>> overrides({"lr": 0.002, "bottom_width": 48, "weight_decay": 1e-4}, bottom_hidden=(64,), top_hidden=(32,),
    ...           optimizer="adam", peer_widths={})
    {'train.lr': 0.002, 'model.bottom_hidden': [48], 'train.weight_decay': 0.0001, 'train.optimizer': 'adamw'}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from vsplit.config.schema import PartyConfig
from vsplit.tune.space import KNOBS, LIMITS, SPACE, Knob, show_bound

#: knob -> the config key it sets (``bottom_width``/``top_width`` set every hidden layer's width)
KEYS = {"lr": "train.lr", "weight_decay": "train.weight_decay", "epochs": "train.epochs",
        "embedding_width": "model.embedding_width", "numeric_embedding": "model.numeric_embedding",
        "numeric_width": "model.numeric_width", "numeric_bins": "model.numeric_bins",
        "bottom_width": "model.bottom_hidden", "top_width": "model.top_hidden", "dropout": "model.dropout"}


def tune_checks(config: PartyConfig) -> list[str]:
    """Problems with ``config``'s ``[tune]`` table, each naming its key."""
    t, errors = config.tune, []
    if t.n_trials < 1:
        errors.append(f"tune.n_trials: must be at least 1, got {t.n_trials}")
    if not 0.0 < t.validation_fraction < 1.0:
        errors.append(f"tune.validation_fraction: must be between 0 and 1, got {t.validation_fraction}")
    label = config.party.role == "label"
    if t.space and not label:
        errors.append("tune.space: only the label party proposes trials; a partner bounds them with tune.bounds")
    if t.bounds and label:
        errors.append("tune.bounds: the label party proposes the trials; narrow its tune.space instead")
    for table in ("space", "bounds"):
        for knob, limits in getattr(t, table).items():
            problem = _limits_problem(knob, limits)
            if problem:
                errors.append(f"tune.{table}.{knob}: {problem}")
    return errors


def _limits_problem(knob: str, limits: Sequence[Any]) -> str | None:
    if knob not in KNOBS:
        return f"vsplit does not search this knob; choose from: {', '.join(KNOBS)}"
    spec = KNOBS[knob]
    if spec.kind == "choice":
        wrong = [c for c in limits if c not in spec.choices]
        if not limits or wrong:
            return f"give a list of the choices among {', '.join(spec.choices)} (got {list(limits)})"
        return None
    if len(limits) != 2 or any(isinstance(v, str) for v in limits) or limits[0] > limits[1]:
        return f"give [low, high], two numbers with low <= high (got {list(limits)})"
    if spec.kind == "int" and any(float(v) != int(v) for v in limits):
        return f"this knob takes whole numbers (got {list(limits)})"
    if spec.log and limits[0] <= 0:
        return f"searched on a log scale: low must be above 0 (got {limits[0]})"
    low, high = LIMITS[knob]
    if limits[0] < low or limits[1] > high:
        return (f"{show_bound(list(limits))} goes beyond vsplit's hard limit {show_bound(LIMITS[knob])} for {knob} "
                "(every partner refuses a trial outside it; docs/tuning.md#bounding-a-search); narrow it")
    return None


def space_of(config: PartyConfig) -> dict[str, Knob]:
    """The label party's search space: ``tune.space`` (each knob narrowed as given), else :data:`SPACE`."""
    if not config.tune.space:
        return dict(SPACE)
    return {knob: KNOBS[knob].narrowed(limits) for knob, limits in config.tune.space.items()}


def bounds_of(config: PartyConfig) -> dict[str, tuple[Any, ...]]:
    """A party's bounds, knob -> ``(low, high)`` (whole numbers as ints) or the allowed choices."""
    out = {}
    for knob, limits in config.tune.bounds.items():
        whole = KNOBS[knob].kind == "int"
        out[knob] = tuple(int(v) if whole and not isinstance(v, str) else v for v in limits)
    return out


def overrides(values: Mapping[str, Any], *, bottom_hidden: Sequence[int], top_hidden: Sequence[int], optimizer: str,
              peer_widths: Mapping[str, int]) -> dict[str, Any]:
    """The config keys (dotted) a trial's ``values`` set, given the party's current hidden layers, optimizer and
    partners' widths: weight decay turns Adam into AdamW, an embedding width applies to every partner."""
    out: dict[str, Any] = {}
    for knob, value in values.items():
        key = KEYS[knob]
        if knob in ("bottom_width", "top_width"):
            layers = bottom_hidden if knob == "bottom_width" else top_hidden
            value = [int(value)] * max(1, len(layers))
        elif KNOBS[knob].kind == "int":
            value = int(value)
        out[key] = value
        if knob == "weight_decay" and value > 0 and optimizer == "adam":
            out["train.optimizer"] = "adamw"
        if knob == "embedding_width" and peer_widths:
            out["model.peer_widths"] = dict.fromkeys(peer_widths, int(value))
    return out


def config_overrides(config: PartyConfig, values: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`overrides` of ``values`` for ``config``'s party."""
    m = config.model
    return overrides(values, bottom_hidden=m.bottom_hidden, top_hidden=m.top_hidden, optimizer=config.train.optimizer,
                     peer_widths=m.peer_widths)


def with_values(config: PartyConfig, values: Mapping[str, Any]) -> PartyConfig:
    """``config`` with a trial's ``values`` applied (the keys of :func:`overrides`)."""
    sections: dict[str, dict[str, Any]] = {}
    for key, value in config_overrides(config, values).items():
        section, name = key.split(".")
        sections.setdefault(section, {})[name] = tuple(value) if isinstance(value, list) else value
    return dataclasses.replace(config, **{s: dataclasses.replace(getattr(config, s), **v)
                                          for s, v in sections.items()})
