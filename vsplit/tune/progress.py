"""What a search's console shows of it: trials done of the study's total and the best validation AUC so far.

The search loop tells a :class:`SearchProgress` of each trial as it ends (one counter and, at the label party, one
point: nothing is read from the study for the console); the console's thread calls :meth:`SearchProgress.read`
(:meth:`~vsplit.console.state.ConsoleState.watch_progress`), which only copies what the loop left.

Example:
    >>> progress = SearchProgress(total=3, done=1)
    >>> progress.trial_ended(best_auc=0.71); progress.trial_ended(best_auc=0.74)
    >>> view = progress.read(); view["done"], view["total"], view["loss"]
    (3, 3, [[2, 0.71], [3, 0.74]])
"""

from __future__ import annotations

from typing import Any


class SearchProgress:
    """Trials ended (``done``, counting those of a resumed study) of ``total`` (``None``: a partner, which is not
    told the study's size) and, at the label party, the best validation AUC after each."""

    def __init__(self, *, total: int | None, done: int = 0) -> None:
        self.total = total
        self.done = done
        self.best: list[list[float]] = []  # [trials done, best validation AUC so far]

    def trial_ended(self, *, best_auc: float | None = None) -> None:
        """One more trial ended (finished, refused or crashed); ``best_auc``: the study's best after it, if any."""
        self.done += 1
        if best_auc is not None:
            self.best.append([self.done, round(float(best_auc), 6)])

    def read(self) -> dict[str, Any]:
        """What the console shows: ``unit``, ``done``, ``total`` and the best AUC so far per trial (read-only)."""
        view: dict[str, Any] = {"unit": "trials", "done": self.done, "total": self.total}
        best = list(self.best)  # the list the search appends to, copied in one step
        if best:
            view.update(loss=[list(p) for p in best], loss_name="best validation AUC so far")
        return view


class TrialConsole:
    """The party's console as one trial's node sees it: the node hands it its pump, channels and detectors (the
    stage, peers and traffic are shown as for ``vsplit train``), but not its steps, epochs or progress: the search's
    progress is trials (:class:`SearchProgress`), and epochs of successive trials would share one chart.

    >>> class State:
    ...     def watch_run(self, *, channels, pump): self.seen = (channels, pump)
    >>> state = State(); watch = TrialConsole(state)
    >>> watch.watch_run(channels={}, pump="pump"); watch.on_step(0, 0, 1, 0.5); watch.on_epoch({"epoch": 0})
    >>> state.seen
    ({}, 'pump')
    """

    def __init__(self, state: Any) -> None:
        self.state = state

    def watch_run(self, *, channels: Any, pump: Any) -> None:
        self.state.watch_run(channels=channels, pump=pump)

    def watch_detectors(self, detectors: Any) -> None:
        self.state.watch_detectors(detectors)

    def watch_progress(self, read: Any) -> None:
        """A trial's own steps or trees: not shown (the console shows the search's trials)."""

    def on_step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        """A trial's training step: nothing to record."""

    def on_epoch(self, record: dict[str, Any]) -> None:
        """A trial's epoch: nothing to record."""
