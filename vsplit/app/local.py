"""Run every party's session in this one process, over memory channels and the real codec.

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.app.session import Schedule, train_session
    >>> from vsplit.party import FeatureParty, LabelParty
    >>> from vsplit.topology import Topology
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(64)]
    >>> bank = LabelParty("bank", pd.DataFrame({"customer_id": ids, "a": rng.normal(size=64), "y": [0, 1] * 32}),
    ...                   label="y")
    >>> shop = FeatureParty("shop", pd.DataFrame({"customer_id": ids[::-1], "b": rng.normal(size=64)}))
    >>> t = Topology.vertical(label_party="bank", feature_parties=["shop"])
    >>> out = run_sessions({p.name: train_session(p, t, schedule=Schedule(epochs=2, batch_size=16))
    ...                     for p in (bank, shop)}, session=b"s" * 16)
    >>> len(out["bank"].result.history), out["shop"].result
    (2, {'epochs_run': 2})
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from vsplit.app.session import Outcome
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.runtime.pump import Tap

#: The order in which stages run when parties are at different ones.
STAGES = ("psi", "train", "score")


def run_sessions(
    sessions: Mapping[str, Any],
    *,
    session: bytes,
    taps: Iterable[Tap] = (),
    pumps: dict | None = None,
    order: Callable[[str], Any] = STAGES.index,
) -> dict[str, Outcome]:
    """Advance every party's session together; return each party's :class:`Outcome`.

    Parties at the same stage run their machines together over fresh memory channels (one session id per stage);
    ``pumps``, if given, receives each stage's pumps (``pumps[stage][party]``, with their communication stats).
    ``order`` sorts stage names (default: :data:`STAGES`; horizontal schedules name their own stages).
    """
    taps = list(taps)
    current: dict[str, tuple[str, Any]] = {}
    outcomes: dict[str, Outcome] = {}
    for name, gen in sessions.items():
        _advance(name, gen, None, current, outcomes, first=True)
    while current:
        stage = min((s for s, _ in current.values()), key=order)
        names = [n for n, (s, _) in current.items() if s == stage]
        machines = {n: current[n][1] for n in names}
        sid = hashlib.sha256(session + stage.encode()).digest()[:16]
        joined = connect(names, session=sid, taps=taps)
        began = time.perf_counter()
        results = run_machines(joined, machines)
        seconds = time.perf_counter() - began
        if pumps is not None:
            pumps[stage] = joined
        for name in names:
            result = results[name]
            if stage == "psi":
                io = dataclasses.replace(result.stats, seconds=seconds, bytes_sent=joined[name].stats.total("sent"))
                result = dataclasses.replace(result, stats=io)
            del current[name]
            _advance(name, sessions[name], result, current, outcomes)
    return outcomes


def _advance(name: str, gen: Any, value: Any, current: dict, outcomes: dict, *, first: bool = False) -> None:
    try:
        current[name] = next(gen) if first else gen.send(value)
    except StopIteration as stop:
        outcomes[name] = stop.value
