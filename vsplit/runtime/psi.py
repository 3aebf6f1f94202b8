"""PSI front doors: align parties in one process, or run one party over a pump (one party per process or host).

Both fill what a bare machine cannot know: the wall-clock seconds and the bytes the party's pump sent. They live in
the runtime because they drive the sans-IO machines of :mod:`vsplit.psi` over channels (and :mod:`vsplit.psi` does not
re-export them: the protocol never imports the runtime).

Example:
    >>> out = align_in_process({"bank": ["a", "b", "c"], "shop": ["b", "c", "d"], "telco": ["c", "b"]},
    ...                        label_party="bank")
    >>> out["bank"].ids == out["shop"].ids == out["telco"].ids
    True
    >>> sorted(out["shop"].ids), out["shop"].stats.intersection
    (['b', 'c'], 2)

:func:`save_rows` writes a party's aligned rows to a ``.npy`` file atomically and :func:`load_rows` memory-maps them
back, so a large result (8 bytes per shared row) need not stay in the process that computed it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from vsplit.atomic import save_with
from vsplit.data.id_sources import IdSource
from vsplit.errors import DataError, RemoteAbort
from vsplit.protocol.machine import Machine
from vsplit.psi.alignment import Alignment
from vsplit.psi.config import PsiConfig
from vsplit.psi.ids import IdPolicy
from vsplit.psi.machines import psi_machines
from vsplit.psi.parallel import Backend
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.runtime.pump import Pump, Tap


def align_in_process(
    tables: Mapping[str, Sequence[object] | IdSource],
    *,
    label_party: str,
    config: PsiConfig | None = None,
    policies: Mapping[str, IdPolicy] | None = None,
    backend: Backend | None = None,
    taps: Iterable[Tap] = (),
) -> dict[str, Alignment]:
    """Align all parties' IDs in this process over in-memory channels; return each party's :class:`Alignment`.

    Frames still pass through the codec (``taps`` see every one). If a party fails on its own data, its detailed
    local error is raised (e.g. :class:`AlignmentError` for no overlap) rather than the peers' abort.
    """
    machines = psi_machines(tables, label_party=label_party, config=config, policies=policies, backend=backend)
    links = [(label_party, name) for name in machines if name != label_party]
    pumps = connect(list(machines), session=os.urandom(16), links=links, taps=taps)
    began = time.perf_counter()
    try:
        run_machines(pumps, dict(machines))
    except RemoteAbort as abort:
        local = next((m.error for m in machines.values() if m.error is not None), None)
        if local is not None:
            raise local from abort
        raise
    failed = next((m.error for m in machines.values() if m.error is not None), None)
    if failed is not None:
        raise failed
    seconds = time.perf_counter() - began
    return {name: _with_io(m.result, seconds, pumps[name]) for name, m in machines.items()}


def align_estimator_rows(ids: Mapping[str, np.ndarray], *, label_party: str, alignment: str,
                         random_state: int) -> tuple[dict[str, np.ndarray], dict | None]:
    """Each party's rows of the customers all parties share, in sorted-ID order, as the notebook estimators align
    them: by PSI in this process (``alignment="psi"``) or a plain join (``"join"``); with the PSI statistics the
    estimators keep as ``psi_stats_`` (``None`` for a join)."""
    from vsplit.psi.alignment import canonical_rows, plain_join

    if alignment == "join":
        return plain_join(ids), None
    out = align_in_process({n: list(v) for n, v in ids.items()}, label_party=label_party,
                           config=PsiConfig(context=f"vsplit-estimator-{random_state}"))
    stats = out[label_party].stats
    psi_stats = {"sizes": {label_party: stats.size, **stats.peer_sizes}, "intersection": stats.intersection,
                 "seconds": stats.seconds, "bytes_sent": {n: a.stats.bytes_sent for n, a in out.items()}}
    return {n: canonical_rows(a) for n, a in out.items()}, psi_stats


def run_party(pump: Pump, machine: Machine) -> Alignment:
    """Run one party's PSI machine to completion over ``pump`` (blocking); return its :class:`Alignment`."""
    began = time.perf_counter()
    result = pump.run(machine)
    return _with_io(result, time.perf_counter() - began, pump)


def _with_io(result: Alignment, seconds: float, pump: Pump) -> Alignment:
    stats = dataclasses.replace(result.stats, seconds=seconds, bytes_sent=pump.stats.total("sent"))
    return dataclasses.replace(result, stats=stats)


def save_rows(alignment: Alignment, path: str | Path) -> Path:
    """Write ``alignment.rows`` (int64, in the agreed order) to the ``.npy`` file ``path`` atomically; return it."""
    rows = np.ascontiguousarray(alignment.rows, dtype=np.int64)
    save_with(path, lambda handle: np.save(handle, rows, allow_pickle=False))
    return Path(path)


def load_rows(path: str | Path) -> np.ndarray:
    """The rows :func:`save_rows` wrote, memory-mapped read-only (int64, one dimension, checked)."""
    rows = np.load(path, mmap_mode="r", allow_pickle=False)
    if rows.dtype != np.int64 or rows.ndim != 1:
        raise DataError(f"{path}: not aligned rows (dtype {rows.dtype}, {rows.ndim} dimensions)")
    return rows
