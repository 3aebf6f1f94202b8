"""What the bank does with a partner's cached-mode snapshot: check it, then merge its parts into the table it holds.

A snapshot (or a delta) is accepted only if its signature verifies against the partner's pinned certificate, its
embeddings have the width the model version expects and every value is finite; a refused one changes nothing. The
parts of one snapshot are merged when the last arrives: a full snapshot replaces the held table, a delta is applied
to it (:meth:`~vsplit.serve.table.EmbeddingTable.apply`).

Example:
    >>> import numpy as np
    >>> from vsplit.serve.messages import Snapshot, id_keys
    >>> keys = id_keys(["1", "2"], run_id="v1")
    >>> part = Snapshot(run_id="v1", seq=1, full=True, part=0, parts=1, keys=keys, values=np.ones((2, 3), np.float32),
    ...                 removed=keys[:0], signature=np.zeros(0, np.uint8))
    >>> len(merge_snapshot(None, [part]))
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vsplit.serve import messages as m
from vsplit.serve.table import EmbeddingTable


def check_snapshot(msg: m.Snapshot, *, cert: str | Path, width: int) -> bool:
    """Whether ``msg`` is signed by the key of ``cert`` and holds finite embeddings of ``width`` columns."""
    from vsplit.serve.signing import verify

    digest = m.snapshot_digest(msg.run_id, msg.seq, msg.full, msg.part, msg.parts, msg.keys, msg.values, msg.removed)
    if not verify(cert, digest, msg.signature.tobytes()):
        return False
    return msg.values.shape[1] == width and bool(np.isfinite(msg.values).all())


def merge_snapshot(held: EmbeddingTable | None, parts: Sequence[m.Snapshot]) -> EmbeddingTable:
    """The table after every part of one snapshot: ``held`` replaced (a full snapshot, or nothing held) or updated."""
    keys = np.concatenate([p.keys for p in parts])
    values = np.concatenate([p.values for p in parts])
    removed = np.concatenate([p.removed for p in parts])
    if parts[-1].full or held is None:
        return EmbeddingTable.build(keys, values)
    return held.apply(keys, values, removed)
