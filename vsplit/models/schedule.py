"""A learning-rate schedule over the epochs of split training, that every party applies to its own optimizer.

Each party scales its own optimizer's learning rate at the start of each epoch from the epoch's index and the run's
epoch count (both in the training plan every party receives), so nothing more crosses a cut and the split still
equals the same network trained in one place. Early stopping still picks the epoch whose weights are kept; the
schedule runs over ``epochs``, the most the run may train, so a run that stops early never reaches its low end.

``"constant"``: the optimizer's own rate every epoch. ``"cosine"``: from the optimizer's rate at the first epoch down
along half a cosine, ``lr * (1 + cos(pi * epoch / epochs)) / 2``.

Example:
    >>> [round(lr_factor("cosine", e, 4), 3) for e in range(4)]
    [1.0, 0.854, 0.5, 0.146]
    >>> lr_factor("constant", 3, 4)
    1.0
"""

from __future__ import annotations

import math
from typing import Any

#: what ``train.lr_schedule`` (and ``SplitClassifier(lr_schedule=...)``) accepts
LR_SCHEDULES = ("constant", "cosine")


def check_lr_schedule(name: str, *, key: str = "lr_schedule") -> str | None:
    """The problem with schedule ``name`` under ``key`` (``None`` if it is one of :data:`LR_SCHEDULES`)."""
    if name in LR_SCHEDULES:
        return None
    return f"{key}: must be one of {', '.join(LR_SCHEDULES)}; got {name!r}"


def lr_factor(name: str, epoch: int, epochs: int) -> float:
    """The learning rate of epoch ``epoch`` (from 0) of ``epochs``, as a fraction of the optimizer's own."""
    if name == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * epoch / max(epochs, 1)))
    return 1.0


def scale_lr(optimizer: Any, factor: float) -> None:
    """Set every parameter group's learning rate to ``factor`` times its own first one (kept as ``initial_lr``)."""
    for group in optimizer.param_groups:
        group["lr"] = group.setdefault("initial_lr", group["lr"]) * factor
