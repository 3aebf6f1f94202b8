"""The error tree of vsplit.

Every error says what went wrong and what to do about it. Errors that cross a party boundary are reduced to an
:class:`AbortCode` (see :mod:`vsplit.protocol.abort`): a peer never sees record IDs, values or tracebacks.

    VsplitError
    ├── ConfigError          bad configuration or arguments (names the key path)
    ├── DataError            bad input data (names the column and the fix)
    ├── AlignmentError       record alignment failed (no overlap, duplicates, ...)
    ├── ProtocolError        a protocol was broken
    │   ├── RemoteAbort      the peer aborted with a code
    │   └── DivergenceError  a loss was not finite: training diverged (names the party whose input was out of range)
    ├── TransportError       the channel failed (timeouts, dropped peers, oversize frames)
    │   └── AuthenticationError
    ├── CheckpointError      a checkpoint is missing, corrupt or belongs to another run
    │   └── UnreadableCheckpoint  a checkpoint file is truncated or corrupt
    └── PrivacyAlarm         a party's detector judged the gradients it received not honest; it stopped

Example:
    >>> try:
    ...     raise DataError("bank: column 'age' is missing; add it or remove it from the preset")
    ... except VsplitError as exc:
    ...     print(exc)
    bank: column 'age' is missing; add it or remove it from the preset
"""

from __future__ import annotations


class VsplitError(Exception):
    """Base class of every error vsplit raises on purpose."""


class ConfigError(VsplitError):
    """A configuration value or argument is wrong."""


class DataError(VsplitError):
    """Input data is unusable as given."""


class AlignmentError(VsplitError):
    """The parties' records cannot be aligned."""


class ProtocolError(VsplitError):
    """A protocol rule was broken.

    ``local`` tells whether this side broke it (a bug or misuse here) or the peer did.
    """

    def __init__(self, message: str, *, local: bool = False, code: int | None = None) -> None:
        super().__init__(message)
        self.local = local
        self.code = code


class RemoteAbort(ProtocolError):
    """The peer stopped the protocol and sent only an abort code."""


class DivergenceError(ProtocolError):
    """A training or validation loss was not finite: the run stops, naming the party whose input went out of range.
    The peers are told ``AbortCode.DIVERGED`` (12); the command exits with code 3."""


#: ``AbortCode.DIVERGED`` (not imported: this module imports nothing of vsplit)
DIVERGED = 12


class TransportError(VsplitError):
    """The channel failed: timeout, closed connection, oversize frame."""


class AuthenticationError(TransportError):
    """The peer could not prove it is the configured party."""


class CheckpointError(VsplitError):
    """A checkpoint is missing, corrupt, or belongs to another run or party."""


class UnreadableCheckpoint(CheckpointError):
    """A checkpoint file is truncated or corrupt (``--resume`` falls back on an earlier one)."""


class PrivacyAlarm(VsplitError):
    """A detector at this party found the gradients it received unlike honest training (e.g. hijacked by the
    server), and the party stopped before sending anything more. The peers are told only
    ``AbortCode.CANCELLED`` (9): "stopped by its operator"; ``detection`` holds what the detector measured."""

    code = 9  # vsplit.protocol.abort.AbortCode.CANCELLED (not imported: this module imports nothing of vsplit)

    def __init__(self, message: str, *, detection: object = None) -> None:
        super().__init__(message)
        self.detection = detection


__all__ = [
    "AlignmentError",
    "AuthenticationError",
    "CheckpointError",
    "ConfigError",
    "DataError",
    "PrivacyAlarm",
    "ProtocolError",
    "RemoteAbort",
    "TransportError",
    "VsplitError",
]
