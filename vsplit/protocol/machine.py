"""The interface every sans-IO protocol machine implements.

A machine never touches sockets, threads or clocks. It is fed one decoded message at a time and answers with the
messages to send; a pump (:mod:`vsplit.runtime.pump`) moves them over whatever channel joins the parties.
A machine that talks to several peers may also say whom it still waits for (``expects``, see
:func:`still_expects`), so that a peer that finished and left is told apart from one it still needs.

Example:
    >>> class Echo:
    ...     done = False
    ...     result = None
    ...     def start(self):
    ...         return []
    ...     def receive(self, sender, msg):
    ...         self.done = True
    ...         return [Outgoing(sender, msg)]
    >>> Echo().receive("bank", "hi")
    [Outgoing(to='bank', message='hi')]
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from vsplit.protocol.message import Message


class Outgoing(NamedTuple):
    """A message to send, and the party to send it to (a named tuple: cheap, as two are built every step)."""

    to: str
    message: Message


class Machine(Protocol):
    """A sans-IO protocol participant."""

    @property
    def done(self) -> bool:
        """True once the machine has finished and expects no more messages."""

    @property
    def result(self) -> Any:
        """What the machine produced; valid once :attr:`done` is true."""

    def start(self) -> list[Outgoing]:
        """Messages to send before anything has been received."""

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take one message from ``sender``; return the messages to send in answer."""

    # Optional: ``expects(peer: str) -> bool``, True while the machine still needs a message from ``peer``. A
    # pump asks it when ``peer`` closes its channel cleanly: a peer that finished its part may leave while the
    # machine talks to the others, but not while the machine waits for it. See :func:`still_expects`.


def still_expects(machine: Machine, peer: str) -> bool:
    """Whether ``machine`` still needs a message from ``peer``: its ``expects(peer)``, or True if it has none.

    A machine without ``expects`` is taken to need every peer until it is done; as it cannot say so when a peer
    closes, the pump only finds out once the machine stalls (see :class:`vsplit.runtime.pump.Pump`).

    Example:
        >>> class Collect:
        ...     done, result = False, None
        ...     def __init__(self): self.missing = {"shop", "telco"}
        ...     def expects(self, peer): return peer in self.missing
        >>> still_expects(Collect(), "shop"), still_expects(Collect(), "insurer"), still_expects(object(), "shop")
        (True, False, True)
    """
    ask = getattr(machine, "expects", None)
    return True if ask is None else bool(ask(peer))
