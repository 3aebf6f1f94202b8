"""An exponential moving average of a party's own parameters, used for validation and as the weights it keeps.

Theory of operation. After every optimizer step the party updates its average,
``average = d * average + (1 - d) * parameter`` with ``d = min(decay, (1 + t) / (10 + t))`` at the ``t``-th update
(the usual warm-up, so the first epochs are not dominated by the initial weights). Before the validation rows are
scored it swaps the average into its modules, and back to the trained values before the next epoch trains, so
early stopping judges, and keeps, the averaged weights. Each party averages only its own parameters, from values it
already has: nothing more crosses a cut, and a split network still equals the same network trained in one place
(its averages are the same numbers). Buffers (e.g. BatchNorm statistics) are not averaged.

Example:
    >>> import torch
    >>> p = torch.nn.Parameter(torch.zeros(2))
    >>> avg = ParameterAverage([p], decay=0.99)
    >>> with torch.no_grad():
    ...     _ = p.fill_(1.0)
    >>> avg.update(); avg.swap_in(); [round(v, 3) for v in p.tolist()]   # d = 2 / 11 at the first update
    [0.818, 0.818]
    >>> avg.swap_out(); p.tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where the average is used: loading a party config checks the decay without it
    import torch


def check_ema(decay: float, *, key: str = "ema") -> str | None:
    """The problem with an average ``decay`` under ``key`` (``None``: fine; 0 turns the average off)."""
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 <= decay < 1:
        return f"{key}: the decay of the parameters' moving average must be in [0, 1) (0: off; e.g. 0.99), got " \
               f"{decay!r}"
    return None


class ParameterAverage:
    """The moving average of ``params`` (a party's own), with its decay per optimizer step."""

    def __init__(self, params: Sequence[torch.nn.Parameter], *, decay: float) -> None:
        problem = check_ema(decay)
        if problem:
            raise ValueError(problem)
        self.params = list(params)
        self.decay = float(decay)
        self.updates = 0
        self.average = [p.detach().clone() for p in self.params]
        self._trained: list[torch.Tensor] | None = None

    def update(self) -> None:
        """Fold the parameters' current values into the average (after an optimizer step)."""
        import torch

        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        with torch.no_grad():
            torch._foreach_lerp_(self.average, [p.detach() for p in self.params], 1.0 - d)

    def swap_in(self) -> None:
        """Put the average into the parameters, keeping the trained values aside (no-op if already in)."""
        import torch

        if self._trained is None:
            self._trained = [p.detach().clone() for p in self.params]
            with torch.no_grad():
                torch._foreach_copy_([p.data for p in self.params], self.average)

    def swap_out(self) -> None:
        """Put the trained values back into the parameters (no-op if they are there)."""
        import torch

        if self._trained is not None:
            with torch.no_grad():
                torch._foreach_copy_([p.data for p in self.params], self._trained)
            self._trained = None

    def state_dict(self) -> dict[str, Any]:
        """The average, its update count and the trained values set aside (for a checkpoint)."""
        return {"updates": self.updates, "average": [t.clone() for t in self.average],
                "trained": None if self._trained is None else [t.clone() for t in self._trained]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`."""
        self.updates = int(state["updates"])
        import torch

        self.average = [torch.as_tensor(t).clone() for t in state["average"]]
        trained = state.get("trained")
        self._trained = None if trained is None else [torch.as_tensor(t).clone() for t in trained]
