"""What a cut costs over a real link between two organizations, per epoch.

Each training step sends the crossing tensors of one batch forward and waits for their gradients: the bytes go at
the link's bandwidth, and every step pays one round trip (half of one when nothing comes back, as when only the raw
input crosses). TLS and framing overheads are left out: vsplit's own wire adds 0.17% (``benchmarks/transport.py``).

Example:
    >>> link = Link(bandwidth_mbps=100, rtt_ms=20, rows=1000, batch_size=100)
    >>> link.epoch_bytes(forward=400, backward=400)
    800000
    >>> round(link.epoch_seconds(forward=400, backward=400), 3)   # 0.064 s of bytes + 10 round trips
    0.264
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from vsplit.errors import ConfigError

#: Bytes per value of the dtypes crossing tensors can be sent as.
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int8": 1, "bool": 1}


def itemsize(dtype: str) -> int:
    """Bytes per value of a dtype named as in PyTorch without the ``torch.`` prefix."""
    if dtype not in ITEMSIZE:
        raise ConfigError(f"unknown dtype {dtype!r} for the crossing tensors; use one of {sorted(ITEMSIZE)}")
    return ITEMSIZE[dtype]


@dataclass(frozen=True)
class Link:
    """A link between the two parties and the size of an epoch.

    Args:
        bandwidth_mbps: usable bandwidth in megabits per second (each way).
        rtt_ms: round-trip time in milliseconds.
        rows: training rows per epoch.
        batch_size: rows per step.
    """

    bandwidth_mbps: float
    rtt_ms: float
    rows: int
    batch_size: int = 256

    def __post_init__(self) -> None:
        for name in ("bandwidth_mbps", "rows", "batch_size"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"link: {name} must be positive, got {getattr(self, name)!r}")
        if self.rtt_ms < 0:
            raise ConfigError(f"link: rtt_ms must be zero or positive, got {self.rtt_ms!r}")

    @property
    def steps(self) -> int:
        return math.ceil(self.rows / self.batch_size)

    def epoch_bytes(self, *, forward: float, backward: float) -> int:
        """Bytes per epoch, both ways, for per-sample ``forward`` and ``backward`` bytes."""
        return round((forward + backward) * self.rows)

    def epoch_seconds(self, *, forward: float, backward: float) -> float:
        """Seconds of communication per epoch: bytes at the bandwidth plus the round trips of the steps."""
        transfer = self.epoch_bytes(forward=forward, backward=backward) * 8 / (self.bandwidth_mbps * 1e6)
        trips = self.steps * (1.0 if backward else 0.5)
        return transfer + trips * self.rtt_ms / 1e3

    def to_dict(self) -> dict:
        return asdict(self)
