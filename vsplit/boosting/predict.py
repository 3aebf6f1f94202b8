"""Prediction in one round: every partner evaluates all its recorded splits of all trees at once.

The label party asks each partner once (:class:`~vsplit.boosting.messages.Ask`: how many aligned rows); a partner
answers with one bit per row and record (:class:`~vsplit.boosting.messages.Decisions`), computed from its own codes
(:meth:`vsplit.boosting.partner.PartnerModel.decisions`); the label party walks the trees with those bits and its own
codes (:meth:`vsplit.boosting.trees.BoostModel.margins`). One round trip per partner, whatever the depth and number
of trees; the label party learns the bits, the partner learns nothing of the label party's side.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vsplit.boosting.messages import Ask, Decisions
from vsplit.boosting.partner import PartnerModel
from vsplit.boosting.trees import BoostModel
from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message


class LabelPredict:
    """The label party's side: ``result`` is the probability of every row once each partner answered."""

    def __init__(self, model: BoostModel, *, own_codes: np.ndarray, partners: Sequence[str]) -> None:
        self.model, self.own_codes, self.partners = model, np.asarray(own_codes), list(partners)
        self.records = [sum(s.party == k for t in model.trees for s in t.splits.values())
                        for k in range(1, len(self.partners) + 1)]
        self._bits: dict[int, np.ndarray] = {}
        self._waiting: set[str] = set()
        self.done = False
        self.result: np.ndarray | None = None

    def expects(self, peer: str) -> bool:
        """Whether ``peer``'s decisions are still awaited."""
        return peer in self._waiting

    def start(self) -> list[Outgoing]:
        """Ask every partner at once."""
        self._waiting = set(self.partners)
        return [Outgoing(p, Ask(rows=len(self.own_codes))) for p in self.partners]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take one partner's bits; when all are in, walk the trees."""
        if sender not in self._waiting or not isinstance(msg, Decisions):
            raise ProtocolError(f"boosting prediction: unexpected {type(msg).__name__} from {sender!r}")
        party = self.partners.index(sender) + 1
        if msg.bits.shape != (len(self.own_codes), self.records[party - 1]):
            raise ProtocolError(f"boosting prediction: {sender!r} sent bits of shape {msg.bits.shape}, expected "
                                f"{(len(self.own_codes), self.records[party - 1])}")
        self._bits[party] = msg.bits
        self._waiting.discard(sender)
        if not self._waiting:
            self.result = self.model.predict_proba(own_codes=self.own_codes, decisions=self._bits)
            self.done = True
        return []


class PartnerPredict:
    """A partner's side: answers one :class:`Ask` about its ``codes`` (binned with its training bins)."""

    def __init__(self, model: PartnerModel, *, codes: np.ndarray, label: str = "bank") -> None:
        self.model, self.codes, self.label = model, np.asarray(codes), label
        self.done = False
        self.result = None

    def expects(self, peer: str) -> bool:
        """The partner waits for the label party's one question."""
        return peer == self.label and not self.done

    def start(self) -> list[Outgoing]:
        """The label party asks first."""
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Answer with the decisions of every recorded split for every row."""
        if sender != self.label or not isinstance(msg, Ask) or msg.rows != len(self.codes):
            raise ProtocolError(f"boosting prediction: unexpected {type(msg).__name__} from {sender!r}")
        self.done = True
        return [Outgoing(self.label, Decisions(bits=self.model.decisions(self.codes)))]
