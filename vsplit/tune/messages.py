"""The messages of a search between organizations (``vsplit tune``). Type codes 0x0901–0x09FF.

What crosses: the label party's proposal of a trial (its knob values: settings, never data), each partner's answer
(accepted, or refused with a code naming the knob and the partner's own bound: its config, not its data), the label
party's decision (train the trial or skip it), and at the end the best trial, its values and the validation AUCs the
label party measured. Values travel as a small JSON object of knob -> number or word, checked against the knobs vsplit
searches when the message is built, so a decoded proposal never holds anything else.

Example:
    >>> TuneProposal(number=3, values='{"lr": 0.001, "numeric_embedding": "piecewise"}').knobs()["lr"]
    0.001
    >>> TuneProposal(number=3, values='{"rows": [1, 2]}')
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: trial values: 'rows' is not a knob vsplit searches
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from vsplit.protocol.message import Message, message, require
from vsplit.tune.space import KNOBS

#: the longest values text a tune message may carry
MAX_VALUES = 4096


class Answer(IntEnum):
    """A partner's answer to a proposal."""

    ACCEPTED = 0
    #: a value lies outside the partner's bound (the answer names the knob and the bound)
    OUT_OF_BOUNDS = 1


def encode_values(values: dict[str, Any]) -> str:
    """A trial's values as the compact JSON the messages carry (keys sorted)."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), allow_nan=False)


def decode_values(text: str, *, what: str = "trial values") -> dict[str, Any]:
    """The knob values of ``text``: a JSON object of knobs vsplit searches -> finite numbers or words."""
    require(len(text) <= MAX_VALUES, f"{what}: {len(text)} characters, over {MAX_VALUES}")
    values = _json(text, what=what)
    require(isinstance(values, dict), f"{what}: not an object")
    for knob, value in values.items():
        require(knob in KNOBS, f"{what}: {knob!r} is not a knob vsplit searches")
        if KNOBS[knob].kind == "choice":
            ok = isinstance(value, str) and value in KNOBS[knob].choices
            require(ok, f"{what}: {knob} = {_shown(value)} is not one of its choices")
        else:
            require(_finite(value), f"{what}: {knob} = {_shown(value)} is not a finite number")
    return values


def _json(text: str, *, what: str) -> Any:
    try:
        return json.loads(text, parse_constant=_refuse)
    except ValueError as exc:  # not JSON, a bare NaN, or an integer of more digits than Python converts
        require(False, f"{what}: not JSON ({exc})")
    except RecursionError:
        require(False, f"{what}: not JSON (nested too deeply)")


def _finite(value: Any) -> bool:
    """Whether ``value`` is a number (not a bool) that a float holds and that is finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer of hundreds of digits
        return False


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**20 else "a huge integer"
    return text if len(text) <= 40 else text[:40] + "..."


def _refuse(token: str) -> Any:
    raise ValueError(f"the bare token {token}")


@message(0x0901)
@dataclass(frozen=True)
class TuneProposal(Message):
    """Label party -> each partner: trial ``number`` with these knob ``values`` (JSON)."""

    number: int
    values: str

    def __post_init__(self) -> None:
        require(self.number >= 0, f"trial number {self.number} is negative")
        decode_values(self.values)

    def knobs(self) -> dict[str, Any]:
        return decode_values(self.values)


@message(0x0902)
@dataclass(frozen=True)
class TuneAnswer(Message):
    """Partner -> label party: trial ``number`` accepted, or refused (``code``) for ``knob`` outside ``bound``."""

    number: int
    code: int
    knob: str = ""
    bound: str = ""

    def __post_init__(self) -> None:
        require(self.code in Answer._value2member_map_, f"unknown answer code {self.code}")
        require(self.code == Answer.ACCEPTED or self.knob in KNOBS, f"a refusal names a knob, got {self.knob!r}")
        require(len(self.bound) <= 256, "a bound is at most 256 characters")


@message(0x0903)
@dataclass(frozen=True)
class TuneDecision(Message):
    """Label party -> each partner: train trial ``number`` now (``go``), or skip it (a party refused it)."""

    number: int
    go: bool


@message(0x0904)
@dataclass(frozen=True)
class TuneEnd(Message):
    """Label party -> each partner: the search is over; the best trial (``best`` = -1: none finished), its values
    and validation AUC, and every finished trial's validation AUC (JSON, trial number -> AUC)."""

    best: int
    values: str
    auc: float
    scores: str

    def __post_init__(self) -> None:
        require(self.best >= -1, f"best trial {self.best} is invalid")
        require(0.0 <= self.auc <= 1.0, "the best AUC is a number between 0 and 1")
        if self.best >= 0:
            decode_values(self.values, what="best values")
        require(len(self.scores) <= 64 * 1024, "scores are at most 64 KiB")
        scores = _json(self.scores, what="scores") if self.scores else {}
        require(isinstance(scores, dict) and all(k.isdigit() and k.isascii() and len(k) <= 9 and _finite(v)
                                                 and 0 <= v <= 1 for k, v in scores.items()),
                "scores: an object of trial number -> AUC (a number between 0 and 1)")

    def all_scores(self) -> dict[int, float]:
        return {int(k): float(v) for k, v in json.loads(self.scores or "{}").items()}
