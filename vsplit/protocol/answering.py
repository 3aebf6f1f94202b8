"""A partner's machine that only answers the label party: the shape the tree, WOE and scorecard partners share.

The label party speaks first and leads every step; the partner takes only the messages its current step allows
(``_expect``) and hands each to its handler (:meth:`AnswersLabel._handlers`). Anything else, or anything from another
peer, is refused with a :class:`~vsplit.errors.ProtocolError` naming the machine.

Example:
    >>> from vsplit.protocol.message import Message
    >>> class Ping(Message):
    ...     pass
    >>> class Echo(AnswersLabel):
    ...     protocol = "echo partner"
    ...     def __init__(self):
    ...         self.label, self.done, self._expect = "bank", False, (Ping,)
    ...     def _handlers(self):
    ...         return {Ping: lambda msg: [Outgoing(self.label, msg)]}
    >>> echo = Echo()
    >>> echo.start(), echo.expects("bank"), echo.expects("shop")
    ([], True, False)
    >>> echo.receive("shop", Ping())
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: echo partner: unexpected Ping from 'shop'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message


class AnswersLabel:
    """Base of a partner machine led by the label party ``label``; subclasses set ``protocol`` (for errors),
    ``label``, ``done`` and ``_expect``, and map message types to handlers in :meth:`_handlers`."""

    protocol: ClassVar[str] = "partner"
    label: str
    done: bool
    _expect: tuple[type, ...]

    def expects(self, peer: str) -> bool:
        """The partner waits for the label party until it is done."""
        return peer == self.label and not self.done

    def start(self) -> list[Outgoing]:
        """The label party speaks first."""
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take one message from the label party; answer it."""
        if sender != self.label or not isinstance(msg, self._expect):
            raise ProtocolError(f"{self.protocol}: unexpected {type(msg).__name__} from {sender!r}")
        return self._handlers()[type(msg)](msg)

    def _handlers(self) -> Mapping[type, Callable[[Any], list[Outgoing]]]:
        raise NotImplementedError
