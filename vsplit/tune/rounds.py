"""The rounds of a search between organizations, as sans-IO machines (no sockets, no clocks).

Theory of operation. Every trial opens with a round: the label party's :class:`ProposeRound` sends each partner a
:class:`~vsplit.tune.messages.TuneProposal`; each partner's :class:`AnswerRound` checks the values against its own
bounds and answers (:class:`~vsplit.tune.messages.TuneAnswer`: accepted, or refused naming the knob and its bound);
once every partner answered, the label party tells them all whether the trial trains
(:class:`~vsplit.tune.messages.TuneDecision`: only if nobody refused). The search closes with :class:`EndRound`: the
best trial and the validation AUCs (:class:`~vsplit.tune.messages.TuneEnd`), which an :class:`AnswerRound` returns
only once :func:`check_end` found it names a trial this partner trained, with the values it trained, within its
bounds: a forged end never becomes the partner's ``best.toml``. A partner's refusal reaches the label party's log and
files only as :func:`~vsplit.protocol.text.printable` text.

Example:
    >>> label = ProposeRound(["shop"], number=0, values={"numeric_bins": 40})
    >>> partner = AnswerRound("shop", bounds={"numeric_bins": (8, 32)})
    >>> [answer] = partner.receive("bank", label.start()[0].message)
    >>> answer.message.knob, answer.message.bound
    ('numeric_bins', '[8, 32]')
    >>> [decision] = label.receive("shop", answer.message)
    >>> partner.receive("bank", decision.message), partner.result.go, label.result.refusals
    ([], False, {'shop': 'shop refuses the trial: numeric_bins = 40 is outside its bound [8, 32]'})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.protocol.text import printable
from vsplit.tune.messages import Answer, TuneAnswer, TuneDecision, TuneEnd, TuneProposal, decode_values, encode_values
from vsplit.tune.space import TrialRefused, check_trial


@dataclass
class Proposed:
    """A trial as a round left it: its number and values, whether it trains, and each refusal (party -> reason)."""

    number: int
    values: dict[str, Any]
    go: bool
    refusals: dict[str, str] = field(default_factory=dict)


class ProposeRound:
    """The label party: propose trial ``number`` with ``values`` to ``partners``; result: a :class:`Proposed`."""

    def __init__(self, partners: Sequence[str], *, number: int, values: Mapping[str, Any]) -> None:
        self.partners, self.number, self.values = list(partners), number, dict(values)
        self.answers: dict[str, TuneAnswer] = {}
        self.done, self.result = False, None

    def expects(self, peer: str) -> bool:
        return peer in self.partners and peer not in self.answers

    def start(self) -> list[Outgoing]:
        proposal = TuneProposal(number=self.number, values=encode_values(self.values))
        return [Outgoing(p, proposal) for p in self.partners]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if not isinstance(msg, TuneAnswer) or not self.expects(sender) or msg.number != self.number:
            raise ProtocolError(f"trial {self.number}: unexpected {type(msg).__name__} from {sender!r}")
        self.answers[sender] = msg
        if len(self.answers) < len(self.partners):
            return []
        refusals = {p: f"{p} refuses the trial: {a.knob} = {self.values.get(a.knob)} is outside its bound "
                       f"{printable(a.bound, limit=80)}"  # the bound is the partner's text
                    for p, a in self.answers.items() if a.code != Answer.ACCEPTED}
        self.done, self.result = True, Proposed(self.number, self.values, not refusals, refusals)
        decision = TuneDecision(number=self.number, go=not refusals)
        return [Outgoing(p, decision) for p in self.partners]


class AnswerRound:
    """A partner: answer the label party's proposal within ``bounds`` (and vsplit's hard limits), then take its
    decision; result: a :class:`Proposed` (``refusals`` holds this party's own, if it refused), or the
    :class:`TuneEnd` of the search once :func:`check_end` accepted it against ``trained`` (trial number -> the values
    this party trained it with)."""

    def __init__(self, me: str, *, bounds: Mapping[str, Sequence[Any]],
                 trained: Mapping[int, Mapping[str, Any]] | None = None) -> None:
        self.me, self.bounds = me, dict(bounds)
        self.trained = dict(trained or {})
        self.proposal: TuneProposal | None = None
        self.refusal = ""
        self.done, self.result = False, None

    def start(self) -> list[Outgoing]:
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if isinstance(msg, TuneEnd) and self.proposal is None:
            check_end(self.me, msg, trained=self.trained, bounds=self.bounds)
            self.done, self.result = True, msg
            return []
        if isinstance(msg, TuneProposal) and self.proposal is None:
            self.proposal = msg
            try:
                check_trial(self.me, msg.knobs(), self.bounds)
            except TrialRefused as refusal:
                self.refusal = str(refusal).split(" (")[0]
                answer = TuneAnswer(number=msg.number, code=Answer.OUT_OF_BOUNDS, knob=refusal.knob,
                                    bound=refusal.bound)
                return [Outgoing(sender, answer)]
            return [Outgoing(sender, TuneAnswer(number=msg.number, code=Answer.ACCEPTED))]
        if isinstance(msg, TuneDecision) and self.proposal is not None and msg.number == self.proposal.number:
            if msg.go and self.refusal:
                raise ProtocolError(f"trial {msg.number}: the label party trains a trial {self.me} refused")
            refusals = {self.me: self.refusal} if self.refusal else {}
            self.done = True
            self.result = Proposed(msg.number, self.proposal.knobs(), msg.go, refusals)
            return []
        raise ProtocolError(f"{self.me}: unexpected {type(msg).__name__} from {sender!r} in a tune round")


class EndRound:
    """The label party: tell ``partners`` the search is over (:class:`TuneEnd`); done once sent."""

    def __init__(self, partners: Sequence[str], *, best: int, values: Mapping[str, Any], auc: float,
                 scores: Mapping[int, float]) -> None:
        import json

        self.partners = list(partners)
        self.end = TuneEnd(best=best, values=encode_values(dict(values)) if best >= 0 else "", auc=float(auc),
                           scores=json.dumps({str(k): v for k, v in scores.items()}, allow_nan=False))
        self.done, self.result = False, None

    def expects(self, peer: str) -> bool:
        return False

    def start(self) -> list[Outgoing]:
        self.done = True
        return [Outgoing(p, self.end) for p in self.partners]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        raise ProtocolError(f"unexpected {type(msg).__name__} from {sender!r} after the search ended")


def check_end(me: str, end: TuneEnd, *, trained: Mapping[int, Mapping[str, Any]],
              bounds: Mapping[str, Sequence[Any]]) -> None:
    """Refuse (:class:`~vsplit.errors.ProtocolError`) an end of search whose best trial is not one ``me`` trained
    (``trained``: number -> values), with those values, within ``bounds`` and vsplit's hard limits, its AUC the one
    the end reports for it. What a partner writes to ``best.toml`` is what passed here.

    >>> end = TuneEnd(best=2, values='{"lr": 0.002}', auc=0.9, scores='{"2": 0.9}')
    >>> check_end("shop", end, trained={2: {"lr": 0.002}}, bounds={})
    >>> try:
    ...     check_end("shop", end, trained={2: {"lr": 0.003}}, bounds={})
    ... except ProtocolError as refusal:
    ...     print(str(refusal).split(" as the best ")[1].split(";")[0])
    with values other than those shop trained it with
    """
    if end.best < 0:
        return
    then = ("nothing written (tune/best.toml). The label party is misbehaving or runs another search: ask its "
            "operator, then run vsplit tune again")
    values = decode_values(end.values, what="best values")
    try:
        check_trial(me, values, bounds)
    except TrialRefused as refusal:
        raise ProtocolError(f"{me}: the label party's end of the search names values {me} refuses "
                            f"({str(refusal).split(' (')[0]}); {then}") from None
    if end.best not in trained:
        raise ProtocolError(f"{me}: the label party's end of the search names trial {end.best} as the best, a trial "
                            f"{me} did not train; {then}")
    if dict(trained[end.best]) != values:
        raise ProtocolError(f"{me}: the label party's end of the search names trial {end.best} as the best with values "
                            f"other than those {me} trained it with; {then}")
    if end.all_scores().get(end.best) != end.auc:
        raise ProtocolError(f"{me}: the label party's end of the search gives trial {end.best} two different AUCs; "
                            f"{then}")
