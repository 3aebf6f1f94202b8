"""The knobs a search proposes, and the bounds a party puts on them.

A trial is a dict of knob values. The label party draws every knob from its search space, and every knob but
``top_width`` governs what leaves a partner too: its bottom's shape (:data:`PARTNER_KNOBS`: its width, its numeric
embedding, its dropout) and how far its bottom moves from its initial weights (``lr``, ``weight_decay``,
``epochs``). So each partner checks a trial against the bounds in its own config (``[tune] bounds``) and, for every
knob, against vsplit's hard :data:`LIMITS`, which hold even where its config bounds nothing: a trial that would not
train (``lr = 1e-12``, ``epochs = 0``) leaves a partner's bottom at its initial weights, and an absurd width
(``embedding_width = 2000000``) builds hundreds of millions of parameters at the partner. A trial outside a bound or
a limit is refused with :class:`TrialRefused`, naming the knob, the value and the bound. A bound is ``(low, high)``
for a number and the allowed choices for a word (``numeric_embedding``). :func:`estimator_params` maps a trial onto
:class:`~vsplit.estimator.SplitClassifier` parameters.

Example:
    >>> try:
    ...     check_trial("shop", {"numeric_bins": 40, "lr": 0.01}, {"numeric_bins": (8, 32)})
    ... except TrialRefused as refusal:
    ...     print(str(refusal).split(" (")[0], "|", refusal.knob, refusal.bound)
    shop refuses the trial: numeric_bins = 40 is outside its bound [8, 32] | numeric_bins [8, 32]
    >>> try:
    ...     check_trial("shop", {"lr": 1e-12, "numeric_embedding": "none"}, {})  # its config bounds nothing
    ... except TrialRefused as refusal:
    ...     print(str(refusal).split(" (")[0])
    shop refuses the trial: lr = 1e-12 is outside its bound [1e-05, 1]
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
#: knobs that shape a partner's own bottom model
PARTNER_KNOBS = ("embedding_width", "numeric_embedding", "numeric_width", "numeric_bins", "bottom_width", "dropout")
#: vsplit's hard limits: every party refuses a trial outside them, whatever its config says (docs/tuning.md,
#: "Bounding a search", says why each). A config's bounds and space must lie within them.
LIMITS: dict[str, tuple[Any, ...]] = {
    "lr": (1e-5, 1.0),  # below: the bottom barely leaves its initial weights; above: training diverges
    "weight_decay": (0.0, 0.1),  # above: the weights are pulled towards zero faster than they learn
    "epochs": (1, 200),  # 0 trains nothing; each epoch sends every shared row's embedding once more
    "embedding_width": (1, 1024),  # the cut layer: what leaves a partner per row, and its memory
    "numeric_width": (1, 64),  # numbers per numeric column: the partner's first layer grows with it
    "numeric_bins": (2, 256),  # piecewise bins per numeric column, fitted on the partner's rows
    "bottom_width": (1, 1024),  # the partner's hidden layers
    "top_width": (1, 1024),  # the label party's top (not a partner's, but no more absurd there)
    "dropout": (0.0, 0.9),  # 1 drops everything: the bottom's output no longer depends on its training
    "numeric_embedding": ("piecewise", "periodic", "none"),
}


def show_bound(limits: Sequence[Any]) -> str:
    """A bound as refusals print it: ``[8, 32]`` for a range, ``{piecewise, none}`` for choices."""
    if limits and isinstance(limits[0], str):
        return "{" + ", ".join(str(c) for c in limits) + "}"
    return "[" + ", ".join(_number(v) for v in limits) + "]"


def _number(value: Any) -> str:
    """``value`` as a bound shows it: a whole number in full (``2000000``), any other float as ``%g``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def inside(value: Any, limits: Sequence[Any]) -> bool:
    """Whether ``value`` is within ``limits`` (a ``(low, high)`` range, or the allowed choices)."""
    if limits and isinstance(limits[0], str):
        return str(value) in {str(c) for c in limits}
    return isinstance(value, (int, float)) and not isinstance(value, bool) and limits[0] <= value <= limits[1]


def check_trial(party: str, values: Mapping[str, Any], bounds: Mapping[str, Sequence[Any]]) -> None:
    """Refuse (:class:`TrialRefused`) any value of ``values`` outside ``party``'s ``bounds`` (knob -> (low, high),
    or knob -> allowed choices), outside vsplit's hard :data:`LIMITS`, or not whole for a whole-number knob."""
    for name, limits in bounds.items():
        if name not in KNOBS:
            raise ConfigError(f"{party}: tune.{name} bounds a knob vsplit does not search; choose from: "
                              f"{', '.join(KNOBS)}")
        if name in values and not inside(values[name], limits):
            bound = show_bound(limits)
            raise TrialRefused(f"{party} refuses the trial: {name} = {_short(values[name])} is outside its bound "
                               f"{bound} (tune.{name} in {party}'s config)", knob=name, bound=bound)
    for name, value in values.items():
        limits = LIMITS.get(name)
        if limits is None:  # not a knob: a proposal names only knobs (vsplit.tune.messages checks when decoding)
            raise TrialRefused(f"{party} refuses the trial: {name!r} is not a knob vsplit searches", knob=name)
        whole = KNOBS[name].kind != "int" or (inside(value, limits) and float(value).is_integer())
        if not inside(value, limits) or not whole:
            bound = show_bound(limits)
            what = "is not a whole number" if inside(value, limits) else f"is outside its bound {bound}"
            raise TrialRefused(f"{party} refuses the trial: {name} = {_short(value)} {what} (vsplit's hard limit for "
                               f"{name}, whatever a config says; docs/tuning.md)", knob=name, bound=bound)


def _short(value: Any) -> str:
    """A proposed value as a refusal shows it: at most 24 characters (a peer may send an integer of 300 digits)."""
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


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
