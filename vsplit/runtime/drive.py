"""Drive one party's session over its pump: each stage's machine in turn, the same generator both runtimes run.

Example:
    >>> class Done:
    ...     done, result = True, 42
    ...     def start(self): return []
    >>> def session():
    ...     got = yield "only", Done()
    ...     return got + 1
    >>> class Pump:
    ...     def run(self, machine): return machine.result
    ...     def fail(self, exc): pass
    >>> seconds = {}
    >>> drive(session(), Pump(), seconds), list(seconds)
    (43, ['only'])
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def drive(session: Any, pump: Any, seconds: dict[str, float] | None = None, *,
          run: Callable[[Any, str, Any], Any] | None = None) -> Any:
    """Run ``session``'s machines over ``pump`` until it returns; its return value. ``seconds`` gets each stage's
    wall time; ``run(pump, stage, machine)`` runs a stage (default: ``pump.run(machine)``). On a failure, in a
    machine or in the session between its stages, the peers are told a code (``pump.fail``) and the error is
    raised."""
    try:
        stage, machine = next(session)
        while True:
            began = time.perf_counter()
            value = pump.run(machine) if run is None else run(pump, stage, machine)
            if seconds is not None:
                seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - began
            stage, machine = session.send(value)
    except StopIteration as stop:
        return stop.value
    except BaseException as exc:
        pump.fail(exc)
        raise
