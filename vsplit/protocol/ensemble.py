"""Before an ensemble run (``[model] kind = "ensemble"``): the parties check they share the settings that shape it.

Theory of operation: which stages an ensemble run has depends on four settings every party must share, the
networks of its bag (``ensemble.networks``), whether it refits on every row (``ensemble.refit``), whether the
weight is fixed (``ensemble.weight``: no rows set aside, no weight stage) and the networks' partner
(``ensemble.second``: the trees or the scorecard). Each partner sends them first
(:class:`EnsembleSettings`); the label party compares every partner's with its own and answers
:class:`EnsembleAgreed`, or stops the run with an error naming the partner and the key (the partners are told
:data:`~vsplit.protocol.abort.AbortCode.CONFIG_MISMATCH`), before any PSI or training.

Example:
    >>> from vsplit.runtime.inprocess import connect, run_machines
    >>> mine = EnsembleSettings(networks=2, refit=1, fixed=0)
    >>> machines = {"bank": LabelAgree(mine, partners=["shop"]), "shop": PartnerAgree(mine, label="bank")}
    >>> run_machines(connect(["bank", "shop"], session=b"e" * 16), machines)["shop"]
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vsplit.errors import ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message, require

#: each setting: its config key and how it reads
KEYS = {"networks": "ensemble.networks", "refit": "ensemble.refit", "fixed": "ensemble.weight (set or not)",
        "second": "ensemble.second"}
#: ``EnsembleSettings.second``: the networks' partner, as a number on the wire
SECONDS = ("trees", "scorecard")


@message(0x0E01)
@dataclass(frozen=True)
class EnsembleSettings(Message):
    """A party's settings that shape an ensemble run: networks of the bag, refit (1/0), a fixed weight (1/0), the
    networks' partner (an index of :data:`SECONDS`: 0 the trees, 1 the scorecard)."""

    networks: int
    refit: int
    fixed: int
    second: int = 0

    def __post_init__(self) -> None:
        require(1 <= self.networks <= 1000 and self.refit in (0, 1) and self.fixed in (0, 1)
                and 0 <= self.second < len(SECONDS), "EnsembleSettings: networks, refit, fixed or second out of range")


@message(0x0E02)
@dataclass(frozen=True)
class EnsembleAgreed(Message):
    """The label party's answer: every partner's settings equal its own."""

    agreed: int = 1


class LabelAgree:
    """The label party's side: ``result`` is ``True`` once every partner's settings equal ``settings``."""

    def __init__(self, settings: EnsembleSettings, *, partners: Sequence[str]) -> None:
        self.settings, self.partners = settings, list(partners)
        self._heard: set[str] = set()
        self.done = False
        self.result: bool | None = None

    def expects(self, peer: str) -> bool:
        return peer in self.partners and peer not in self._heard

    def start(self) -> list[Outgoing]:
        """The partners speak first."""
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take a partner's settings; refuse them naming the key where they differ; with every partner's in, agree."""
        if not self.expects(sender) or not isinstance(msg, EnsembleSettings):
            raise ProtocolError(f"ensemble settings: unexpected {type(msg).__name__} from {sender!r}")
        for field, key in KEYS.items():
            theirs, mine = getattr(msg, field), getattr(self.settings, field)
            if theirs != mine:
                raise ProtocolError(f"{sender!r} is configured with {key} = {_text(field, theirs)}, this party with "
                                    f"{_text(field, mine)}; set the same [ensemble] networks, refit, weight (set or "
                                    "not) and second at every party", code=AbortCode.CONFIG_MISMATCH)
        self._heard.add(sender)
        if len(self._heard) < len(self.partners):
            return []
        self.done, self.result = True, True
        return [Outgoing(p, EnsembleAgreed()) for p in self.partners]


class PartnerAgree:
    """A partner's side: sends its settings, then waits for the label party's agreement."""

    def __init__(self, settings: EnsembleSettings, *, label: str) -> None:
        self.settings, self.label = settings, label
        self.done = False
        self.result: bool | None = None

    def expects(self, peer: str) -> bool:
        return peer == self.label and not self.done

    def start(self) -> list[Outgoing]:
        return [Outgoing(self.label, self.settings)]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if sender != self.label or not isinstance(msg, EnsembleAgreed):
            raise ProtocolError(f"ensemble settings: unexpected {type(msg).__name__} from {sender!r}")
        self.done, self.result = True, True
        return []


def _text(field: str, value: int) -> str:
    if field == "second":
        return repr(SECONDS[value])
    return str(value) if field == "networks" else ("true" if value else "false")
