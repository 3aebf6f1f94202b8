"""Turn a party's ID column into the u-coordinates it will send: normalise, hash, drop duplicates, shuffle.

The column is read batch by batch and only the 32-byte hashes are kept, in row order. Duplicates are found on the
hashes (equal salted hashes mean equal normalised IDs), so no set of Python strings is ever built. The sending order
is a uniformly random permutation from a generator seeded with 256 bits from the OS CSPRNG, so the positions of
shared IDs in what a party sends say nothing about where they sit in its table.

Example:
    >>> from vsplit.psi.sources import as_source
    >>> from vsplit.psi.ids import IdPolicy
    >>> ready = prepare_ids(as_source(["b", "a", "b"]), policy=IdPolicy(dedupe="first"), salt=bytes(32), label=b"t")
    >>> (ready.rows_read, ready.duplicates, sorted(ready.send_rows.tolist()))
    (3, 1, [0, 1])
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from vsplit.errors import AlignmentError
from vsplit.psi import curve
from vsplit.psi.ids import IdPolicy, encode_batch
from vsplit.psi.index import repeated_rows
from vsplit.psi.sources import IdSource

#: Rows read and hashed at a time.
BATCH_ROWS = 1 << 16


@dataclass
class PreparedIds:
    """A party's hashed IDs and its sending order.

    Attributes:
        hashed: ``(rows_read, 32)`` uint8, the u-coordinate of every row, in row order (duplicates included).
        send_rows: int64, the row of each point in sending order (shuffled, without duplicates).
        rows_read: rows in the source.
        duplicates: rows dropped as repeats of an earlier row.
    """

    hashed: np.ndarray
    send_rows: np.ndarray
    rows_read: int
    duplicates: int


def prepare_ids(source: IdSource, *, policy: IdPolicy, salt: bytes, label: bytes) -> PreparedIds:
    """Hash every ID of ``source`` under ``salt`` and ``label``, apply the duplicate policy, shuffle.

    Raises:
        DataError: an ID is missing, empty or of an unusable type (names the row).
        AlignmentError: duplicates under ``dedupe="error"`` (names how many and the fix).
    """
    hint = source.size_hint()
    parts: list[np.ndarray] = []
    hashed = np.empty((hint, curve.POINT_BYTES), dtype=np.uint8) if hint is not None else None
    rows = 0
    for batch in source.batches(BATCH_ROWS):
        points = curve.hash_to_u(encode_batch(batch, policy=policy, first_row=rows), salt=salt, label=label)
        if hashed is not None and rows + len(points) <= len(hashed):
            hashed[rows : rows + len(points)] = points
        else:
            if hashed is not None:  # the hint was wrong: fall back to collecting parts
                parts, hashed = [hashed[:rows]], None
            parts.append(points)
        rows += len(points)
    if hashed is None:
        hashed = np.concatenate(parts) if parts else np.zeros((0, curve.POINT_BYTES), np.uint8)
    hashed = hashed[:rows]
    repeats = repeated_rows(hashed)
    if repeats.size and policy.dedupe == "error":
        raise AlignmentError(
            f"{source.name}: {repeats.size} duplicate ID(s) after normalisation (first repeat at row {repeats[0]}); "
            "remove them, or pass IdPolicy(dedupe='first') to keep the first row of each"
        )
    keep = np.ones(rows, dtype=bool)
    keep[repeats] = False
    rng = np.random.default_rng(int.from_bytes(os.urandom(32), "little"))
    send_rows = np.flatnonzero(keep).astype(np.int64)
    rng.shuffle(send_rows)
    return PreparedIds(hashed=hashed, send_rows=send_rows, rows_read=rows, duplicates=int(repeats.size))
