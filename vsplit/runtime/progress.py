"""Progress bars for training, with tqdm: one bar for the whole training phase (its total grows by an epoch's steps
as each epoch starts), showing the epoch (from 1), the loss and the last validation AUC; and one of the bytes sent for
a stage without steps (PSI).

Example:
    >>> bar = TqdmProgress(disable=True)
    >>> bar.on_step(0, 0, 2, 0.7); bar.on_step(0, 1, 2, 0.6); bar.on_epoch({"epoch": 0, "val_auc": 0.8})
    >>> bar.on_step(1, 0, 2, 0.5); bar._bar.total
    4
    >>> bar.close()
"""

from __future__ import annotations

import time
from typing import Any

from tqdm.auto import tqdm


class TqdmProgress:
    """A training callback that draws one tqdm bar for the training phase on the label party; :meth:`close` it
    when training ends."""

    def __init__(self, *, disable: bool = False, desc: str = "training", leave: bool = True) -> None:
        self.disable, self.desc, self.leave = disable, desc, leave
        self._bar: Any = None
        self._epoch = -1
        self._postfix: dict[str, str] = {}

    def on_step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        if self._bar is None:
            self._bar = tqdm(total=0, desc=self.desc, unit="step", disable=self.disable, leave=self.leave)
        if epoch != self._epoch:
            self._bar.total += steps
            self._epoch = epoch
            self._postfix["epoch"] = str(epoch + 1)
        self._bar.update(1)
        if step % 10 == 0 or step + 1 == steps:
            self._postfix["loss"] = f"{loss:.4f}"
            self._bar.set_postfix(self._postfix, refresh=False)

    def on_epoch(self, record: dict[str, Any]) -> None:
        if self._bar is not None and record.get("val_auc") is not None:
            self._postfix["val_auc"] = f"{record['val_auc']:.4f}"
            self._bar.set_postfix(self._postfix)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class EpochClock:
    """A training callback that records the wall-clock seconds of each epoch (steps and validation).

    >>> clock = EpochClock()
    >>> clock.on_step(0, 0, 1, 0.5); clock.on_epoch({"epoch": 0})
    >>> len(clock.seconds)
    1
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start: float | None = None

    def on_step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        if step == 0:
            self._start = time.perf_counter()

    def on_epoch(self, record: dict[str, Any]) -> None:
        if self._start is not None:
            self.seconds.append(time.perf_counter() - self._start)
            self._start = None


class TrafficProgress:
    """A pump tap (:class:`~vsplit.runtime.pump.Pump`'s ``taps``) that draws one tqdm bar of the bytes this party
    sends during a stage without steps, such as an alignment (PSI); :meth:`close` it when the stage ends.

    >>> bar = TrafficProgress(desc="bank PSI", disable=True)
    >>> bar("bank", "partner", None, bytearray(10)); bar("bank", "partner", None, bytearray(5)); bar.sent
    15
    >>> bar.close()
    """

    def __init__(self, *, desc: str, disable: bool = False) -> None:
        self._bar = tqdm(total=None, desc=desc, unit="B", unit_scale=True, disable=disable)
        self.sent = 0  # bytes

    def __call__(self, sender: str, recipient: str, message: Any, frame: Any) -> None:
        self.sent += len(frame)
        self._bar.update(len(frame))

    def close(self) -> None:
        self._bar.close()
