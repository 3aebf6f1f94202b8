"""A party's own torch random stream, so parties sharing one process never consume each other's randomness.

Dropout and other random layers draw from torch's global generator. Wrapping each party's computation in its
:class:`PartyRng` gives it a private stream, so a run in one process and a run across processes (one party each)
draw the same numbers.

Parties that run in threads of one process (:class:`~vsplit.node.PartyNode` over memory channels, the serving
tests) share that one global generator, so a ``with`` block holds a process-wide reentrant lock from swapping its
stream in to swapping it out: another thread's block waits instead of swapping its own stream in between (which
handed one party's numbers to another and made threaded runs differ from run to run). A block is a machine's
compute on messages already received (sans-IO: no block ever waits for a peer), so the lock only orders compute.

Example:
    >>> import torch
    >>> a, b = PartyRng(1), PartyRng(1)
    >>> with a:
    ...     x = torch.rand(2)
    >>> with b:
    ...     y = torch.rand(2)
    >>> bool(torch.equal(x, y))
    True
"""

from __future__ import annotations

import threading

import torch
from torch import nn


class PartyRng:
    """A private CPU random state, swapped in for the duration of a ``with`` block."""

    def __init__(self, seed: int) -> None:
        with _LOCK:
            saved = torch.get_rng_state()
            torch.manual_seed(seed)
            self._state = torch.get_rng_state()
            torch.set_rng_state(saved)
        self._outer: torch.Tensor | None = None

    @property
    def state(self) -> torch.Tensor:
        """The stream's state; inside the ``with`` block, the live one (e.g. for a checkpoint written there)."""
        return _GLOBAL.get_state() if self._outer is not None else self._state

    @state.setter
    def state(self, value: torch.Tensor) -> None:
        if self._outer is not None:
            _GLOBAL.set_state(value)
        else:
            self._state = value

    def __enter__(self) -> PartyRng:
        _LOCK.acquire()  # released in __exit__: no other thread swaps its stream in while this one is live
        self._outer = _GLOBAL.get_state()  # what torch.get_rng_state() does, minus a Python call: this runs every step
        _GLOBAL.set_state(self._state)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._state = _GLOBAL.get_state()
            assert self._outer is not None
            _GLOBAL.set_state(self._outer)
            self._outer = None
        finally:
            _LOCK.release()


class OwnStream(nn.Module):
    """Another party's module placed here (the centralized baseline) that still draws from its owner's stream.

    Split training runs each party's segments inside that party's :class:`PartyRng`; the same network in one place
    runs them all at the label party. Wrapping the placed segments of the other parties in their owners' streams
    makes their dropout masks the ones the split draws, so the two runs stay equal with dropout too.
    """

    def __init__(self, module: nn.Module, rng: PartyRng) -> None:
        super().__init__()
        self.module = module
        self.rng = rng

    def forward(self, *args: object) -> object:
        with self.rng:
            return self.module(*args)


_GLOBAL = torch.default_generator
#: held by every live ``with PartyRng`` block (reentrant: the centralized baseline nests its partners' streams)
_LOCK = threading.RLock()
