"""Whether a party's secret numbers appear in what it sent, without matches made by chance.

Searching a frame's bytes for the 4-byte float32 of a secret value finds it by chance: an integer such as 105 is
``00 00 d2 42`` in float32, and two bytes of header padding followed by a float32 activation whose two low bytes
happen to be ``d2 42`` read the same (one chance in 65,536 per frame and value). CI has failed on exactly that. So a
secret counts as sent when

- it is an element of a float array the message carries, compared at that array's precision (a float32 array with
  the values rounded to float32), which is how a party would send it; or
- the 8 bytes of its float64 stand anywhere in the frame (header, strings and packed bytes included), which no
  chance arrangement of activations or ciphertext bytes makes (one in 2^64).

Example:
    >>> from vsplit.protocol.training.messages import TRAIN, Activations
    >>> sent = Activations(cut=0, slot=0, phase=TRAIN, epoch=0, step=0, values=np.array([[0.25, 105.0]], np.float32))
    >>> leaks(sent, b"", [105])
    ['Activations.values holds 105.0']
    >>> leaks(sent, np.float64(7.5).tobytes(), [7.5, 0.5])
    ['the frame holds the float64 bytes of 7.5']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np


def leaks(message: object, frame: bytes, values: Iterable[float]) -> list[str]:
    """Where ``values`` appear in ``message`` (decoded) and ``frame`` (its bytes): one line per finding."""
    values = np.unique(np.asarray(list(values), dtype=np.float64))
    found = []
    for field in dataclasses.fields(message):  # type: ignore[arg-type]
        array = getattr(message, field.name)
        if isinstance(array, np.ndarray) and array.dtype.kind == "f":
            hits = np.isin(values.astype(array.dtype), array.ravel())
            found += [f"{type(message).__name__}.{field.name} holds {v}" for v in values[hits]]
    found += [f"the frame holds the float64 bytes of {v}" for v in values if np.float64(v).tobytes() in frame]
    return found
