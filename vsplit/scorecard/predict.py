"""Scoring a scorecard: one round, in which each partner answers each row's points (and, if it shares them, its
reason codes), and the label party adds the base points and its own.

Example:
    >>> import numpy as np
    >>> from vsplit.scorecard.points import PointsTable
    >>> table = PointsTable(names=("calls",), labels=(("few", "many"),), points=((10.0, -5.0),))
    >>> partner = PartnerPointsMachine(table, codes=np.array([[0], [1]]), label="bank", share_names=True)
    >>> bank = LabelPoints(PointsTable((), (), ()), own_codes=np.zeros((2, 0)), base_points=500.0,
    ...                    partners=["shop"], reasons=1)
    >>> (ask,) = bank.start()
    >>> (answer,) = partner.receive("bank", ask.message)
    >>> _ = bank.receive("shop", answer.message)
    >>> bank.result.score.tolist(), bank.result.reasons[1]
    ([510.0, 495.0], [('shop', 'calls', 15.0)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.scorecard.messages import PartnerPoints, PointsAsk
from vsplit.scorecard.points import PointsTable, top_reasons


@dataclass
class ScoredPoints:
    """The label party's scores: each row's total points, each party's share, and each row's reason codes
    (``(party, attribute, points lost)``, a partner's attribute as ``"#index"`` unless it shares names)."""

    score: np.ndarray
    by_party: dict[str, np.ndarray]
    reasons: list[list[tuple[str, str, float]]] = field(default_factory=list)


class LabelPoints:
    """The label party's side of scoring ``own_codes``' rows (aligned with every partner's)."""

    def __init__(self, table: PointsTable, *, own_codes: np.ndarray, base_points: float, partners: Sequence[str],
                 reasons: int = 0, name: str = "bank") -> None:
        self.table, self.codes, self.base = table, np.asarray(own_codes, dtype=np.int64), float(base_points)
        self.partners, self.reasons, self.name = list(partners), int(reasons), name
        self._answers: dict[str, PartnerPoints] = {}
        self.done = False
        self.result: ScoredPoints | None = None

    def expects(self, peer: str) -> bool:
        return peer in self.partners and peer not in self._answers

    def start(self) -> list[Outgoing]:
        if not len(self.codes):
            raise ProtocolError("scorecard scoring: no aligned row to score", local=True)
        ask = PointsAsk(rows=len(self.codes), reasons=self.reasons)
        return [Outgoing(p, ask) for p in self.partners]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if not self.expects(sender) or not isinstance(msg, PartnerPoints):
            raise ProtocolError(f"scorecard scoring: unexpected {type(msg).__name__} from {sender!r}")
        if len(msg.points) != len(self.codes) or (self.reasons and msg.attributes.shape[1] > self.reasons):
            raise ProtocolError(f"scorecard scoring: {sender!r} answered {len(msg.points)} rows, asked "
                                f"{len(self.codes)}")
        self._answers[sender] = msg
        if len(self._answers) == len(self.partners):
            self._finish()
        return []

    def _finish(self) -> None:
        by_party = {self.name: self.table.score(self.codes) if self.table.names else np.zeros(len(self.codes))}
        by_party |= {p: self._answers[p].points for p in self.partners}
        score = self.base + sum(by_party.values())
        reasons: list[list[tuple[str, str, float]]] = []
        if self.reasons:
            candidates = [self._own_reasons(), *(self._partner_reasons(p) for p in self.partners)]
            for row in range(len(self.codes)):  # a loop over rows, to build readable lists
                merged = sorted((c for part in candidates for c in part[row]), key=lambda c: -c[2])
                reasons.append(merged[: self.reasons])
        self.result, self.done = ScoredPoints(score=score, by_party=by_party, reasons=reasons), True

    def _own_reasons(self) -> list[list[tuple[str, str, float]]]:
        if not self.table.names:
            return [[] for _ in range(len(self.codes))]
        index, cost = top_reasons(self.table.lost(self.codes), count=self.reasons)
        return [[(self.name, self.table.names[j], float(c)) for j, c in zip(i, k, strict=True) if j >= 0]
                for i, k in zip(index, cost, strict=True)]

    def _partner_reasons(self, partner: str) -> list[list[tuple[str, str, float]]]:
        msg = self._answers[partner]
        if not msg.attributes.size:
            return [[] for _ in range(len(self.codes))]
        names = msg.names.split("\n") if msg.names else []
        return [[(partner, names[j] if j < len(names) else f"#{j}", float(c)) for j, c in zip(i, k, strict=True)
                 if j >= 0] for i, k in zip(msg.attributes, msg.lost, strict=True)]


class PartnerPointsMachine:
    """A partner's side of scoring: each row's points; its reason codes if ``share_reasons``, its attribute names
    with them if ``share_names``."""

    def __init__(self, table: PointsTable, *, codes: np.ndarray, label: str = "bank", share_reasons: bool = True,
                 share_names: bool = False) -> None:
        self.table, self.codes, self.label = table, np.asarray(codes, dtype=np.int64), label
        self.share_reasons, self.share_names = share_reasons, share_names
        self.done = False
        self.result: None = None

    def expects(self, peer: str) -> bool:
        return peer == self.label and not self.done

    def start(self) -> list[Outgoing]:
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if sender != self.label or not isinstance(msg, PointsAsk) or self.done:
            raise ProtocolError(f"scorecard scoring: unexpected {type(msg).__name__} from {sender!r}")
        if msg.rows != len(self.codes):
            raise ProtocolError(f"scorecard scoring: the label party asks {msg.rows} rows, this party aligned "
                                f"{len(self.codes)}")
        answer = PartnerPoints(points=self.table.score(self.codes))
        if msg.reasons and self.share_reasons:
            index, cost = top_reasons(self.table.lost(self.codes), count=msg.reasons)
            answer = PartnerPoints(points=answer.points, attributes=index, lost=cost,
                                   names="\n".join(self.table.names) if self.share_names else "")
        self.done = True
        return [Outgoing(self.label, answer)]
