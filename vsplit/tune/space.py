"""The knobs a search proposes, and the bounds a party puts on the knobs that touch its own bottom model.

A trial is a dict of knob values. The label party draws every knob from its search space; a knob in
:data:`PARTNER_KNOBS` shapes each partner's bottom too (its width, its numeric embedding, its dropout), so each
partner checks it against the bounds in its own config (``[tune] bounds``) and refuses a trial outside them with
:class:`TrialRefused`, naming the knob, the value and the bound. A bound is ``(low, high)`` for a number and the
allowed choices for a word (``numeric_embedding``). :func:`estimator_params` maps a trial onto
:class:`~vsplit.estimator.SplitClassifier` parameters.

Example:
    >>> try:
    ...     check_trial("shop", {"numeric_bins": 40, "lr": 0.01}, {"numeric_bins": (8, 32)})
    ... except TrialRefused as refusal:
    ...     print(str(refusal).split(" (")[0], "|", refusal.knob, refusal.bound)
    shop refuses the trial: numeric_bins = 40 is outside its bound [8, 32] | numeric_bins [8, 32]
    >>> estimator_params({"bottom_width": 96, "lr": 0.002})
    {'bottom_hidden': (96,), 'lr': 0.002}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vsplit.errors import ConfigError


class TrialRefused(ConfigError):
    """A party refused a trial's value: it lies outside a bound the party declared (``knob``, ``bound``)."""

    def __init__(self, text: str, *, knob: str = "", bound: str = "") -> None:
        super().__init__(text)
        self.knob, self.bound = knob, bound


@dataclass(frozen=True)
class Knob:
    """One searched value: an int or float between ``low`` and ``high`` (inclusive), on a log scale if ``log``; or
    (``kind="choice"``) one of ``choices``."""

    kind: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[str, ...] = ()

    def suggest(self, trial: Any, name: str) -> Any:
        if self.kind == "choice":
            return trial.suggest_categorical(name, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(name, self.low, self.high, log=self.log)

    def narrowed(self, limits: Sequence[Any]) -> Knob:
        """This knob searched only within ``limits`` (``[low, high]``, or the choices)."""
        if self.kind == "choice":
            return Knob("choice", choices=tuple(str(c) for c in limits))
        return Knob(self.kind, float(limits[0]), float(limits[1]), log=self.log)


#: the default search space of the label party (shared knobs and every party's bottom)
SPACE: dict[str, Knob] = {
    "lr": Knob("float", 3e-4, 3e-3, log=True),
    "weight_decay": Knob("float", 1e-6, 1e-3, log=True),
    "epochs": Knob("int", 10, 40),
    "embedding_width": Knob("int", 8, 32),
    "numeric_width": Knob("int", 4, 16),
    "numeric_bins": Knob("int", 8, 32),
    "bottom_width": Knob("int", 32, 128),
    "top_width": Knob("int", 16, 64),
    "dropout": Knob("float", 0.0, 0.3),
}
#: every knob a search may propose (those of :data:`SPACE`, and the ones searched only when a config asks)
KNOBS: dict[str, Knob] = {**SPACE, "numeric_embedding": Knob("choice", choices=("piecewise", "periodic", "none"))}
#: knobs that shape a partner's own bottom model: each partner's bounds apply to these
PARTNER_KNOBS = ("embedding_width", "numeric_embedding", "numeric_width", "numeric_bins", "bottom_width", "dropout")


def show_bound(limits: Sequence[Any]) -> str:
    """A bound as refusals print it: ``[8, 32]`` for a range, ``{piecewise, none}`` for choices."""
    if limits and isinstance(limits[0], str):
        return "{" + ", ".join(str(c) for c in limits) + "}"
    return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in limits) + "]"


def inside(value: Any, limits: Sequence[Any]) -> bool:
    """Whether ``value`` is within ``limits`` (a ``(low, high)`` range, or the allowed choices)."""
    if limits and isinstance(limits[0], str):
        return str(value) in {str(c) for c in limits}
    return isinstance(value, (int, float)) and not isinstance(value, bool) and limits[0] <= value <= limits[1]


def check_trial(party: str, values: Mapping[str, Any], bounds: Mapping[str, Sequence[Any]]) -> None:
    """Refuse (:class:`TrialRefused`) any value of ``values`` outside ``party``'s ``bounds`` (knob -> (low, high),
    or knob -> allowed choices)."""
    for name, limits in bounds.items():
        if name not in KNOBS:
            raise ConfigError(f"{party}: tune.{name} bounds a knob vsplit does not search; choose from: "
                              f"{', '.join(PARTNER_KNOBS)}")
        if name in values and not inside(values[name], limits):
            bound = show_bound(limits)
            raise TrialRefused(f"{party} refuses the trial: {name} = {values[name]} is outside its bound {bound} "
                               f"(tune.{name} in {party}'s config)", knob=name, bound=bound)


def estimator_params(values: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~vsplit.estimator.SplitClassifier` parameters of a trial's ``values``."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name == "bottom_width":
            out["bottom_hidden"] = (int(value),)
        elif name == "top_width":
            out["top_hidden"] = (int(value),)
        else:
            out[name] = value
    if out.get("weight_decay"):
        out.setdefault("optimizer", "adamw")
    return out
