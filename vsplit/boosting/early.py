"""Early stopping on the label party's validation rows, around the training machines.

Theory of operation: the label party holds out some aligned rows (every party is told which, and trains on the
others). When a tree is finished, :class:`StoppingLabel` holds back what the training machine says next and asks each
partner once (:class:`~vsplit.boosting.messages.Ask`) for its decisions on the held-out rows at the splits it
recorded since the last question (``Ask.first``: the first record not yet asked about; records are numbered in
order, so these are the new tree's; :class:`~vsplit.boosting.messages.Decisions`, answered by
:class:`StoppingPartner`). It keeps the bits it got, adds each new tree's part to the held-out rows' margins, scores
every prefix of the trees (log loss) and stops at the
first count of trees that is ``rounds`` past the best one, keeping the best prefix (as XGBoost's ``best_iteration``);
otherwise the training goes on. A resumed run scores every tree it holds at its first stop, so it stops where an
uninterrupted one does. Stopping,
it tells each partner how many of its records the kept trees use (:class:`Keep`, a prefix, as records are numbered in
order), then :class:`~vsplit.boosting.messages.Finish`.

Example:
    >>> first_stop([0.5, 0.4, 0.45, 0.41, 0.42], rounds=2)
    (4, 2)
    >>> first_stop([0.5, 0.4], rounds=2) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.boosting.bins import rank_codes
from vsplit.boosting.messages import MAX_TREES, Ask, Decisions, Finish
from vsplit.boosting.partner import PartnerModel
from vsplit.boosting.trees import BoostModel
from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message, require


@message(0x0D42)
@dataclass(frozen=True)
class Keep(Message):
    """Training stopped early: the kept trees use this partner's first ``records`` records."""

    records: int

    def __post_init__(self) -> None:
        require(0 <= self.records <= MAX_TREES * 2**16, f"Keep.records out of range: {self.records}")


def first_stop(losses: Sequence[float], *, rounds: int) -> tuple[int, int] | None:
    """``(trees when it stops, trees kept)``: the first count ``rounds`` past the best so far, or ``None``."""
    best = 0
    for k in range(1, len(losses) + 1):
        if losses[k - 1] < losses[best - 1] or best == 0:
            best = k
        if k - best >= rounds:
            return k, best
    return None


def log_loss(labels: np.ndarray, margins: np.ndarray) -> float:
    """Mean logistic loss of ``margins`` (log-odds)."""
    return float(np.mean(np.logaddexp(0.0, margins) - labels * margins))


class HeldCodes:
    """The held-out rows' codes as binned, and as a training machine's codes are: renumbered once, when the machine
    has ordered its categories (``machine.ranks``)."""

    def __init__(self, codes: np.ndarray) -> None:
        self.codes, self._ranked = codes, None

    def like(self, machine: Any) -> np.ndarray:
        if machine.ranks is None:
            return self.codes
        if self._ranked is None:
            self._ranked = rank_codes(self.codes, machine.ranks)
        return self._ranked


class StoppingLabel:
    """The label party's training machine ``machine`` (:class:`~vsplit.boosting.LabelBoost`), stopped early on the
    held-out rows (``own_codes`` as binned, renumbered as the machine's once it ordered its categories; ``labels``)
    after ``rounds`` trees without a better log loss."""

    def __init__(self, machine: Any, *, own_codes: np.ndarray, labels: np.ndarray, rounds: int) -> None:
        if not len(labels) or rounds < 1:
            raise ProtocolError("early stopping needs held-out rows and rounds >= 1", local=True)
        self.machine, self.own_codes, self.labels, self.rounds = machine, np.asarray(own_codes), labels, rounds
        self.losses: list[float] = []
        self._margin: np.ndarray | None = None  # the held-out rows' margins after len(self.losses) trees
        self._held: list[Outgoing] = []
        self._bits: dict[int, np.ndarray] = {}  # per partner: the held-out rows' bits of its records asked so far
        self._waiting: set[str] = set()
        self._scored = len(machine.trees)
        self._held_codes = HeldCodes(self.own_codes)
        self.done = False
        self.result: BoostModel | None = None

    @property
    def trees(self) -> list[Any]:
        """The trees finished so far."""
        return self.machine.trees

    def expects(self, peer: str) -> bool:
        """Whether a message from ``peer`` is awaited (decisions, or the training machine's)."""
        return not self.done and (peer in self._waiting or bool(self.machine.expects(peer)))

    def start(self) -> list[Outgoing]:
        """The training machine's start."""
        return self.machine.start()

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Decisions on the held-out rows, or the training machine's messages."""
        if isinstance(msg, Decisions):
            return self._decisions(sender, msg)
        if self._waiting:
            raise ProtocolError(f"early stopping: {type(msg).__name__} from {sender!r} while decisions are awaited")
        out = self.machine.receive(sender, msg)
        if len(self.machine.trees) == self._scored:
            return out
        self._scored, self._held = len(self.machine.trees), out
        self._waiting = set(self.machine.partners)
        return [Outgoing(p, Ask(rows=len(self.labels), first=self._asked(k)))
                for k, p in enumerate(self.machine.partners, start=1)]

    def _asked(self, party: int) -> int:
        """The records of partner ``party`` (1, 2, ...) whose held-out bits are here."""
        return self._bits[party].shape[1] if party in self._bits else 0

    def _decisions(self, sender: str, msg: Decisions) -> list[Outgoing]:
        if sender not in self._waiting:
            raise ProtocolError(f"early stopping: unexpected Decisions from {sender!r}")
        party = self.machine.partners.index(sender) + 1
        records = 1 + max((s.record for t in self.machine.trees for s in t.splits.values() if s.party == party),
                          default=-1)
        first = self._asked(party)
        if msg.bits.shape[0] != len(self.labels) or first + msg.bits.shape[1] < records:
            raise ProtocolError(f"early stopping: {sender!r} sent bits of shape {msg.bits.shape} from record {first}")
        bits = np.hstack([self._bits[party], msg.bits]) if first else msg.bits
        self._bits[party] = bits[:, :records]  # the records the trees use: the next question starts after them
        self._waiting.discard(sender)
        if self._waiting:
            return []
        m = self.machine
        widths = (m.width, *(m.shapes[p][1] for p in m.partners))
        if self._margin is None:
            self._margin = np.full(len(self.labels), float(m.base))
        for tree in m.trees[len(self.losses):]:  # each tree's part of the held-out margins, computed once
            self._margin = self._margin + BoostModel(trees=(tree,), base=0.0, widths=widths).margins(
                own_codes=self._held_codes.like(m), decisions=self._bits)
            self.losses.append(log_loss(self.labels, self._margin))
        stop = first_stop(self.losses, rounds=self.rounds)
        if stop is None and not m.done:
            held, self._held = self._held, []
            return held
        kept = stop[1] if stop is not None else int(np.argmin(self.losses)) + 1
        trees = tuple(m.trees[:kept])
        self.result = BoostModel(trees=trees, base=m.base, widths=widths)
        self.done = True
        out = []
        for k, p in enumerate(m.partners, start=1):
            used = 1 + max((s.record for t in trees for s in t.splits.values() if s.party == k), default=-1)
            out += [Outgoing(p, Keep(records=used)), Outgoing(p, Finish(trees=len(m.trees)))]
        return out


class StoppingPartner:
    """A partner's training machine ``machine`` (:class:`~vsplit.boosting.PartnerBoost`) that also answers the
    label party's questions about the held-out rows (``codes``: this party's codes of them as binned; renumbered
    as the machine's once it ordered its categories)."""

    def __init__(self, machine: Any, *, codes: np.ndarray) -> None:
        self.machine, self.codes = machine, np.asarray(codes)
        self._held_codes = HeldCodes(self.codes)
        self._keep: int | None = None

    @property
    def done(self) -> bool:
        return bool(self.machine.done)

    @property
    def result(self) -> PartnerModel | None:
        model = self.machine.result
        if model is None or self._keep is None:
            return model
        k = self._keep
        return PartnerModel(columns=model.columns[:k], bins=model.bins[:k], missing_left=model.missing_left[:k],
                            width=model.width)

    def expects(self, peer: str) -> bool:
        return bool(self.machine.expects(peer))

    def start(self) -> list[Outgoing]:
        return self.machine.start()

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Answer an :class:`Ask` about the held-out rows, note a :class:`Keep`, pass the rest on."""
        m = self.machine
        if isinstance(msg, Ask) and sender == m.label:
            if msg.rows != len(self.codes):
                raise ProtocolError(f"early stopping: asked about {msg.rows} rows, this party holds out "
                                    f"{len(self.codes)}")
            if msg.first > len(m.records):
                raise ProtocolError(f"early stopping: asked from record {msg.first}, this party has "
                                    f"{len(m.records)}")
            new = m.records[msg.first :]
            model = PartnerModel(columns=new[:, 0], bins=new[:, 1], missing_left=new[:, 2].astype(np.uint8),
                                 width=m.width)
            return [Outgoing(m.label, Decisions(bits=model.decisions(self._held_codes.like(m))))]
        if isinstance(msg, Keep) and sender == m.label:
            if msg.records > len(m.records):
                raise ProtocolError(f"early stopping: keep {msg.records} records, this party has {len(m.records)}")
            self._keep = msg.records
            return []
        return m.receive(sender, msg)
