"""Where a boosting run starts: the newest tree every party has finished (``vsplit train --resume``).

Theory of operation: each party keeps a checkpoint per finished tree. The label party finishes a tree a little
before a partner knows it is finished (the partner learns it from the next tree's gradients), and a partner may have
died in between, so the parties agree first: each partner tells how many trees it holds (:class:`TreesHeld`; 0 for
a fresh start), the label party answers with the smallest count of all (:class:`ResumeAt`), and every party restarts
from its checkpoint of that many trees. ``done`` says whether training is already over (every tree was finished);
``holdout`` marks the aligned rows the label party holds out for early stopping (empty: none), which no party
trains on.

Example:
    >>> from vsplit.runtime.inprocess import connect, run_machines
    >>> machines = {"bank": LabelResume(held=3, partners=["shop", "telco"], trees=5),
    ...             "shop": PartnerResume(held=2), "telco": PartnerResume(held=3)}
    >>> run_machines(connect(["bank", "shop", "telco"], session=b"r" * 16), machines)["shop"][:2]
    (2, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vsplit.boosting.messages import MAX_ROWS, MAX_TREES
from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message, require, require_array


@message(0x0D40)
@dataclass(frozen=True)
class TreesHeld(Message):
    """A partner's count of finished trees it holds a checkpoint of (0: none, or a fresh start)."""

    trees: int

    def __post_init__(self) -> None:
        require(0 <= self.trees <= MAX_TREES, f"TreesHeld.trees out of range: {self.trees}")


@message(0x0D41)
@dataclass(frozen=True)
class ResumeAt(Message):
    """Every party restarts after ``trees`` trees; ``done`` = 1 when no tree is left to train; ``holdout``: 1 for
    each aligned row held out for early stopping (empty: none)."""

    trees: int
    done: int
    holdout: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def __post_init__(self) -> None:
        require(0 <= self.trees <= MAX_TREES and self.done in (0, 1), "ResumeAt: trees or done out of range")
        require_array("ResumeAt.holdout", self.holdout, dtype="uint8", ndim=1)
        require(len(self.holdout) <= MAX_ROWS and (not len(self.holdout) or int(self.holdout.max()) <= 1),
                "ResumeAt.holdout: more rows than a run takes, or a flag other than 0/1")


class LabelResume:
    """The label party's side: ``result`` is ``(trees to start after, whether training is over, holdout)``."""

    def __init__(self, *, held: int, partners: Sequence[str], trees: int, holdout: np.ndarray | None = None) -> None:
        self.held, self.partners, self.trees = held, list(partners), trees
        self.holdout = np.zeros(0, np.uint8) if holdout is None else np.asarray(holdout, dtype=np.uint8)
        self._counts: dict[str, int] = {}
        self.done = False
        self.result: tuple[int, bool, np.ndarray] | None = None

    def expects(self, peer: str) -> bool:
        """Whether ``peer``'s count is still awaited."""
        return peer in self.partners and peer not in self._counts

    def start(self) -> list[Outgoing]:
        """The partners speak first."""
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take a partner's count; with every count in, tell them all where to start."""
        if not self.expects(sender) or not isinstance(msg, TreesHeld):
            raise ProtocolError(f"boosting resume: unexpected {type(msg).__name__} from {sender!r}")
        self._counts[sender] = msg.trees
        if len(self._counts) < len(self.partners):
            return []
        start = min(self.held, *self._counts.values())
        self.result = (start, start >= self.trees, self.holdout)
        self.done = True
        answer = ResumeAt(trees=start, done=int(start >= self.trees), holdout=self.holdout)
        return [Outgoing(p, answer) for p in self.partners]


class PartnerResume:
    """A partner's side: tells its count, learns where to start (never after its own count)."""

    def __init__(self, *, held: int, label: str = "bank") -> None:
        self.held, self.label = held, label
        self.done = False
        self.result: tuple[int, bool, np.ndarray] | None = None

    def expects(self, peer: str) -> bool:
        """The partner waits for the label party's answer."""
        return peer == self.label and not self.done

    def start(self) -> list[Outgoing]:
        """Tell the label party how many finished trees this party holds."""
        return [Outgoing(self.label, TreesHeld(trees=self.held))]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take the agreed start."""
        if sender != self.label or not isinstance(msg, ResumeAt) or msg.trees > self.held:
            raise ProtocolError(f"boosting resume: unexpected {type(msg).__name__} from {sender!r}")
        self.result, self.done = (msg.trees, bool(msg.done), msg.holdout), True
        return []
