"""After a run's training stages: the label party tells every partner whether a test table's scoring follows.

Theory of operation: a network run's training plan already says so (``Schedule.then_score``); the trees and the
scorecard train without such a plan, so after training the label party sends each partner :class:`ThenScore`
(``score = 1``: it has ``data.test_path`` and scores it next). A partner follows the label party's word, not its own
config: with ``score = 1`` it takes part in the test table's PSI and scoring, from its own ``data.test_path`` or,
without one, from its training table, which holds the customers it knows
(:meth:`AlignedNode._test_table_to_score <vsplit.node.aligned.AlignedNode._test_table_to_score>`); with ``score = 0``
it ends, even with a ``data.test_path`` of its own. So a labelled test table set at the bank only is scored, instead
of the partner leaving and the bank failing on a closed channel.

Example:
    >>> from vsplit.runtime.inprocess import connect, run_machines
    >>> machines = {"bank": LabelThenScore(True, partners=["shop"]), "shop": PartnerThenScore(label="bank")}
    >>> run_machines(connect(["bank", "shop"], session=b"t" * 16), machines)["shop"]
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message, require


@message(0x0E03)
@dataclass(frozen=True)
class ThenScore(Message):
    """The label party's word after training: 1 if its test table is scored next, else 0."""

    score: int

    def __post_init__(self) -> None:
        require(self.score in (0, 1), "ThenScore: score must be 0 or 1")


class LabelThenScore:
    """The label party's side: tells every partner, then is done; ``result`` is what it told."""

    def __init__(self, score: bool, *, partners: Sequence[str]) -> None:
        self.score, self.partners = bool(score), list(partners)
        self.done = False
        self.result: bool | None = None

    def expects(self, peer: str) -> bool:
        return False

    def start(self) -> list[Outgoing]:
        self.done, self.result = True, self.score
        return [Outgoing(p, ThenScore(score=int(self.score))) for p in self.partners]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        raise ProtocolError(f"then score: unexpected {type(msg).__name__} from {sender!r}")


class PartnerThenScore:
    """A partner's side: waits for the label party's word; ``result`` is whether the test table is scored next."""

    def __init__(self, *, label: str) -> None:
        self.label = label
        self.done = False
        self.result: bool | None = None

    def expects(self, peer: str) -> bool:
        return peer == self.label and not self.done

    def start(self) -> list[Outgoing]:
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if sender != self.label or not isinstance(msg, ThenScore):
            raise ProtocolError(f"then score: unexpected {type(msg).__name__} from {sender!r}")
        self.done, self.result = True, bool(msg.score)
        return []
