"""Row-weighted averaging of named tensors: the one seam through which every schedule averages.

TODO: swap in ``vsplit.federated.averaging`` (pure, property-tested, with explicit optimizer-state policies) when it
lands; every caller goes through :func:`average` only.

Float tensors are summed in float64 in the given order, each times its weight, divided by the total weight and cast
back, so the same states in the same order give the same bits at every party and in every runtime. Integer tensors
(BatchNorm's batch count) get the rounded weighted mean.

Example:
    >>> import numpy as np
    >>> average([{"w": np.array([1.0], np.float32)}, {"w": np.array([4.0], np.float32)}], [2, 1])["w"]
    array([2.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from vsplit.errors import ProtocolError


def average(states: Sequence[Mapping[str, np.ndarray]], weights: Sequence[float]) -> dict[str, np.ndarray]:
    """The ``weights``-weighted mean of ``states``, which must name the same tensors with the same shapes."""
    if not states or len(states) != len(weights) or min(weights) <= 0:
        raise ProtocolError("average: one positive weight per state, at least one state", local=True)
    keys = list(states[0])
    for s in states[1:]:
        if list(s) != keys or any(s[k].shape != states[0][k].shape for k in keys):
            raise ProtocolError("average: the states name different tensors or shapes")
    total = float(sum(weights))
    out: dict[str, np.ndarray] = {}
    for k in keys:
        acc = np.zeros(states[0][k].shape, np.float64)
        for s, w in zip(states, weights, strict=True):
            acc += s[k].astype(np.float64) * float(w)
        mean = acc / total
        dtype = states[0][k].dtype
        out[k] = np.asarray(np.rint(mean) if dtype.kind in "iu" else mean, dtype=dtype)  # 0-d stays an array
    return out
