"""The knobs a search proposes, and the bounds a party puts on the knobs that touch its own bottom model.

A trial is a dict of knob values. The label party draws every knob from its search space; a knob in
:data:`PARTNER_KNOBS` shapes each partner's bottom too (its width, its numeric embedding, its dropout), so each
partner checks it against the bounds in its own config (``[tune]``) and refuses a trial outside them with
:class:`TrialRefused`, naming the knob, the value and the bound. :func:`estimator_params` maps a trial onto
:class:`~vsplit.estimator.SplitClassifier` parameters.

Example:
    >>> try:
    ...     check_trial("shop", {"numeric_bins": 40, "lr": 0.01}, {"numeric_bins": (8, 32)})
    ... except TrialRefused as refusal:
    ...     print(str(refusal).split(" (")[0])
    shop refuses the trial: numeric_bins = 40 is outside its bound [8, 32]
    >>> estimator_params({"bottom_width": 96, "lr": 0.002})
    {'bottom_hidden': (96,), 'lr': 0.002}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vsplit.errors import ConfigError


class TrialRefused(ConfigError):
    """A party refused a trial's value: it lies outside a bound the party declared."""


@dataclass(frozen=True)
class Knob:
    """One searched value: an int or float between ``low`` and ``high`` (inclusive), on a log scale if ``log``."""

    kind: str
    low: float
    high: float
    log: bool = False

    def suggest(self, trial: Any, name: str) -> Any:
        if self.kind == "int":
            return trial.suggest_int(name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(name, self.low, self.high, log=self.log)


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
#: knobs that shape a partner's own bottom model: each partner's bounds apply to these
PARTNER_KNOBS = ("embedding_width", "numeric_width", "numeric_bins", "bottom_width", "dropout")


def check_trial(party: str, values: Mapping[str, Any], bounds: Mapping[str, tuple[float, float]]) -> None:
    """Refuse (:class:`TrialRefused`) any value of ``values`` outside ``party``'s ``bounds`` (knob -> (low, high))."""
    for name, (low, high) in bounds.items():
        if name not in SPACE:
            raise ConfigError(f"{party}: tune.{name} bounds a knob vsplit does not search; choose from: "
                              f"{', '.join(PARTNER_KNOBS)}")
        if name in values and not low <= values[name] <= high:
            raise TrialRefused(f"{party} refuses the trial: {name} = {values[name]} is outside its bound "
                               f"[{low}, {high}] (tune.{name} in {party}'s config)")


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
