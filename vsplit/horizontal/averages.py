"""What an AVERAGE stage computes: the row-weighted mean of named arrays, in clear or under secure aggregation.

Theory of operation. The maths is :func:`vsplit.federated.averaging.average_states` (pure, property-tested, integer
counters by the ``weighted_round`` policy); :func:`average` only moves named numpy arrays in and out of it, and
turns a mismatch (a peer's state naming other tensors or shapes) into a protocol error for that peer. Under secure
aggregation (:mod:`vsplit.federated.secure_agg`) the federated server sees only masked integer vectors:
:func:`flatten` lays a client's float arrays out as one vector in name order (what is masked), and
:func:`unflatten` puts the dequantized mean back. Integer arrays (BatchNorm's batch counter) are not in the vector:
under secure aggregation each client keeps its own.

Example:
    >>> import numpy as np
    >>> average([{"w": np.array([1.0], np.float32)}, {"w": np.array([4.0], np.float32)}], [2, 1])["w"]
    array([2.], dtype=float32)
    >>> vector, layout = flatten({"b": np.ones(2, np.float32), "a": np.zeros((1, 1), np.float32)})
    >>> vector.tolist(), sorted(unflatten(vector * 3, layout))
    ([0.0, 1.0, 1.0], ['a', 'b'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from vsplit.errors import ConfigError, ProtocolError
from vsplit.protocol.abort import AbortCode

Layout = tuple[tuple[str, tuple[int, ...], np.dtype], ...]


def average(states: Sequence[Mapping[str, np.ndarray]], weights: Sequence[float]) -> dict[str, np.ndarray]:
    """The ``weights``-weighted mean of ``states`` (the same names, shapes and dtypes in each)."""
    import torch

    from vsplit.federated.averaging import average_states

    tensors = [{k: torch.from_numpy(np.array(v, copy=True)) for k, v in s.items()} for s in states]
    try:
        mean = average_states(tensors, weights)
    except ConfigError as exc:
        raise ProtocolError(f"average: {exc}", code=AbortCode.CONFIG_MISMATCH) from None
    return {k: np.asarray(v.numpy()) for k, v in mean.items()}


def flatten(arrays: Mapping[str, np.ndarray]) -> tuple[np.ndarray, Layout]:
    """The float arrays of ``arrays`` as one float64 vector in name order, and the layout to undo it."""
    layout = tuple((k, tuple(arrays[k].shape), arrays[k].dtype) for k in sorted(arrays) if arrays[k].dtype.kind == "f")
    parts = [np.asarray(arrays[k], np.float64).reshape(-1) for k, _, _ in layout]
    return (np.concatenate(parts) if parts else np.zeros(0)), layout


def unflatten(vector: np.ndarray, layout: Layout) -> dict[str, np.ndarray]:
    """Named arrays of ``layout``'s shapes and dtypes from ``vector``."""
    out, offset = {}, 0
    for name, shape, dtype in layout:
        size = int(np.prod(shape, dtype=np.int64))
        out[name] = np.asarray(vector[offset : offset + size], dtype=dtype).reshape(shape)
        offset += size
    if offset != len(vector):
        raise ProtocolError(f"secure aggregation: a mean of {len(vector)} values for {offset} weights")
    return out
