"""Round checkpoints of a horizontal session: save each party's state at every round's end, resume from a round.

Theory of operation. Every party walks the one global stage list (:func:`compile_schedule`); :func:`my_stages`
yields the stages this party takes part in, from ``keeper.start_round`` on, and whenever the walk passes a round's
end (the next stage belongs to a later round, or the schedule is over) it hands ``snapshot()`` to ``keeper.save``
once for each round passed. A snapshot is a flat dict of named arrays (weights, buffers, optimizer state, the random
stream), so a round a party took no part in is saved with the state it still has. A rerun starts at the first round
every party has finished (the join agrees on it, :mod:`vsplit.horizontal.join`), each party restoring its own
snapshot of the round before: the same stages then run with the same seeds, and the final parameters equal an
uninterrupted run's (``tests/test_horizontal_resume.py``).

Example:
    >>> from vsplit.horizontal.schedule import Settings, compile_schedule
    >>> s = Settings(kind="sequential", rounds=2)
    >>> stages = compile_schedule(s, clients=("a", "b"), server="lab", rows={"a": 4, "b": 4})
    >>> saved = []
    >>> keeper = RoundKeeper(start_round=1, save=lambda r, state: saved.append(r))
    >>> [st.key for st in my_stages(stages, "a", keeper, dict, rounds=2)], saved
    (['h00003', 'h00004', 'h00005'], [1])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.horizontal.schedule import Stage

Snapshot = dict[str, np.ndarray]


@dataclass
class RoundKeeper:
    """Where a session starts (``start_round``), what it restores first (``restored``, the snapshot of the round
    before) and where it saves each finished round (``save(round, snapshot)``)."""

    start_round: int = 0
    restored: Mapping[str, np.ndarray] | None = None
    save: Callable[[int, Snapshot], None] | None = None


def my_stages(stages: Iterable[Stage], name: str, keeper: RoundKeeper | None, snapshot: Callable[[], Any], *,
              rounds: int) -> Iterator[Stage]:
    """``name``'s stages from the keeper's start round on, saving a snapshot at every round's end."""
    start = keeper.start_round if keeper is not None else 0
    save = keeper.save if keeper is not None else None
    done = start - 1

    def passed(until: int) -> None:
        nonlocal done
        while done < until:
            done += 1
            if save is not None:
                save(done, snapshot())

    for stage in stages:
        if name not in stage.parties or stage.round < start:
            continue
        passed(stage.round - 1)
        yield stage
    passed(rounds - 1)


def with_prefix(prefix: str, arrays: Mapping[str, np.ndarray]) -> Snapshot:
    return {f"{prefix}{k}": v for k, v in arrays.items()}


def take_prefix(prefix: str, arrays: Mapping[str, np.ndarray]) -> Snapshot:
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
