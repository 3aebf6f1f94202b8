"""Run several parties' machines in one process over in-memory channels.

Each party gets its own :class:`~vsplit.runtime.pump.Pump` and channels; nothing is shared between parties but
frames. A single thread polls the pumps in turn, so runs are deterministic and cheap (no threads, no sockets).

"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Machine
from vsplit.runtime.pump import Pump, Tap
from vsplit.transport.memory import memory_pair


def connect(
    parties: list[str],
    *,
    session: bytes,
    links: Iterable[tuple[str, str]] | None = None,
    taps: Iterable[Tap] = (),
) -> dict[str, Pump]:
    """Build one pump per party, joined by memory channels along ``links`` (default: every pair)."""
    if links is None:
        links = [(a, b) for i, a in enumerate(parties) for b in parties[i + 1 :]]
    channels: dict[str, dict] = {name: {} for name in parties}
    for a, b in links:
        end_a, end_b = memory_pair()
        channels[a][b] = end_a
        channels[b][a] = end_b
    taps = list(taps)
    return {name: Pump(name, channels[name], session=session, taps=taps) for name in parties}


def run_machines(pumps: dict[str, Pump], machines: dict[str, Machine]) -> dict[str, Any]:
    """Run one machine per party to completion, polling the pumps in turn; return each machine's result."""
    for name, machine in machines.items():
        pumps[name].begin(machine)
    running = [(machine, pumps[name]) for name, machine in machines.items()]
    while running:
        progressed = finished = False
        for machine, pump in running:  # one frame per party per round: a step's two frames, no empty polls
            if machine.done:
                finished = True
            elif pump.poll():
                progressed = True
        if finished:
            running = [(machine, pump) for machine, pump in running if not machine.done]
        elif not progressed:
            waiting = sorted(n for n, m in machines.items() if not m.done)
            raise ProtocolError(f"in-process run stalled: {waiting} wait for messages nobody sends", local=True)
    return {name: m.result for name, m in machines.items()}
