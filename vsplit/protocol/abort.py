"""Abort: the only thing a party tells a peer when it gives up.

An abort carries a numeric code, never a message text, record IDs, values or a traceback, so nothing about a
party's data can leak through an error. Each side logs its own detailed reason locally.

Example:
    >>> Abort(code=AbortCode.NO_OVERLAP).reason
    'the parties share no customers'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from vsplit.protocol.message import Message, message, require


class AbortCode(IntEnum):
    """Why a party aborted. The peer learns this number and nothing else."""

    INTERNAL_ERROR = 1
    PROTOCOL_VIOLATION = 2
    VERSION_MISMATCH = 3
    SESSION_MISMATCH = 4
    CONFIG_MISMATCH = 5
    NO_OVERLAP = 6
    BAD_DATA = 7
    TIMEOUT = 8
    CANCELLED = 9
    AUTHENTICATION = 10
    PEER_LOST = 11
    DIVERGED = 12
    SETUP_FAILED = 13


_REASONS = {
    AbortCode.INTERNAL_ERROR: "the peer hit an internal error (see its own log)",
    AbortCode.PROTOCOL_VIOLATION: "the peer saw a message that broke the protocol",
    AbortCode.VERSION_MISMATCH: "the parties run different protocol versions",
    AbortCode.SESSION_MISMATCH: "the parties were configured for different sessions",
    AbortCode.CONFIG_MISMATCH: "the parties' settings disagree (see the peer's log for which)",
    AbortCode.NO_OVERLAP: "the parties share no customers",
    AbortCode.BAD_DATA: "the peer's own data failed validation (see its log)",
    AbortCode.TIMEOUT: "the peer timed out waiting",
    AbortCode.CANCELLED: "the peer was stopped by its operator",
    AbortCode.AUTHENTICATION: "the peer could not authenticate this party",
    AbortCode.PEER_LOST: "another party of the session dropped out (it crashed or lost its connection)",
    AbortCode.DIVERGED: "training diverged: a loss was not finite (the label party's log names whose input was out "
                        "of range)",
    AbortCode.SETUP_FAILED: "the peer stopped before training: its own config or files failed its checks (see its "
                            "log)",
}


@message(0x0001)
@dataclass(frozen=True)
class Abort(Message):
    """Stop the session; ``code`` is an :class:`AbortCode`."""

    code: int

    def __post_init__(self) -> None:
        require(self.code in AbortCode._value2member_map_, f"unknown abort code {self.code}")

    @property
    def reason(self) -> str:
        """A readable explanation of the code."""
        return _REASONS[AbortCode(self.code)]
