"""Fixed point modulo 2^k: how secure aggregation turns float updates into integers that masks can hide.

Theory of operation. A real value ``x`` becomes the integer ``round(x * 2^f)`` (``f`` = ``frac_bits``), stored
modulo ``2^k`` (``k`` = ``bits``, two's complement) in a ``uint64``; sums of such integers wrap modulo ``2^k``
exactly as ``uint64`` arithmetic does (masked to ``k`` bits when ``k < 64``). A sum is read back as the signed
integer in ``[-2^(k-1), 2^(k-1))`` congruent to it, which is the true sum as long as the true sum lies in that range.

Overflow bound. Each client sends, per coordinate, ``round(w_i * x_i * 2^f)`` with its row count ``w_i <=
max_weight`` and ``|x_i| <= bound``, and one more coordinate, its row count ``w_i`` itself. With ``n`` clients the
sum's magnitude is at most ``n * (max_weight * bound * 2^f + 1/2)``; :meth:`FixedPoint.check_capacity` refuses
any setting where that is not below ``2^(k-1)``, and also requires ``max_weight * bound * 2^f < 2^53`` so that the
float64 product is rounded exactly once. A client whose own values break ``bound`` or ``max_weight`` is refused
before it masks anything (:meth:`FixedPoint.encode`). The defaults (``k = 64``, ``f = 20``, ``bound = 1024``,
``max_weight = 2^22`` rows) allow 1024 clients and resolve ``w_i x_i`` to about 1e-6.

API:
    ``FixedPoint(bits=64, frac_bits=20, bound=1024.0, max_weight=2**22)``: ``.encode(values, weight)``,
    ``.signed(total)``, ``.decode(total)``, ``.check_capacity(clients)``, ``.mask``.

Example:
    >>> import numpy as np
    >>> fp = FixedPoint(frac_bits=4)
    >>> q = fp.encode(np.array([0.5, -1.25]), weight=2)     # 2 * [0.5, -1.25] * 16, then the weight
    >>> fp.signed(q).tolist()
    [16, -40, 2]
    >>> fp.decode(q + q)                                     # two clients: weighted sum and total rows
    (array([ 2., -5.]), 4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ConfigError

_EXACT = 2.0**53  # float64 represents every integer up to this


@dataclass(frozen=True)
class FixedPoint:
    """Fixed-point encoding modulo ``2^bits`` with ``frac_bits`` fractional bits (see the module docstring).

    Attributes:
        bits: ``k``, the modulus' exponent, 16..64.
        frac_bits: ``f``, fractional bits, 0..52.
        bound: The largest ``|x|`` a client may send (the values before weighting).
        max_weight: The most rows one client may weight its values with.
    """

    bits: int = 64
    frac_bits: int = 20
    bound: float = 1024.0
    max_weight: int = 2**22

    def __post_init__(self) -> None:
        if not 16 <= self.bits <= 64:
            raise ConfigError(f"secure aggregation: bits must be 16..64, got {self.bits}")
        if not 0 <= self.frac_bits <= 52:
            raise ConfigError(f"secure aggregation: frac_bits must be 0..52, got {self.frac_bits}")
        if not (math.isfinite(self.bound) and self.bound > 0):
            raise ConfigError(f"secure aggregation: bound must be a positive number, got {self.bound}")
        if not 1 <= self.max_weight:
            raise ConfigError(f"secure aggregation: max_weight must be >= 1, got {self.max_weight}")
        if self.max_weight * self.bound * 2.0**self.frac_bits >= _EXACT:
            raise ConfigError(
                f"secure aggregation: max_weight * bound * 2^frac_bits = "
                f"{self.max_weight * self.bound * 2.0**self.frac_bits:.3g} is not below 2^53, so a weighted value "
                "would not be rounded exactly; lower frac_bits, bound or max_weight"
            )

    @property
    def mask(self) -> np.uint64:
        """``2^k - 1``: the bits a value modulo ``2^k`` occupies in its ``uint64``."""
        return np.uint64((1 << self.bits) - 1)

    def capacity(self) -> int:
        """The most clients whose sum is guaranteed to fit: ``n * (max_weight * bound * 2^f + 1/2) < 2^(k-1)``."""
        per_client = self.max_weight * self.bound * 2.0**self.frac_bits + 0.5
        return max(0, math.ceil(2.0 ** (self.bits - 1) / per_client) - 1)

    def check_capacity(self, clients: int) -> None:
        """Refuse ``clients`` clients if their sum could overflow ``k`` bits (see the module docstring)."""
        if clients > self.capacity():
            raise ConfigError(
                f"secure aggregation: {clients} clients with |values| <= {self.bound} and up to {self.max_weight} "
                f"rows each could overflow {self.bits}-bit fixed point with {self.frac_bits} fractional bits "
                f"(at most {self.capacity()} clients fit); raise bits or lower frac_bits, bound or max_weight"
            )

    def encode(self, values: np.ndarray, *, weight: int) -> np.ndarray:
        """``[round(weight * x * 2^f) for x in values] + [weight]`` modulo ``2^k``, as ``uint64``.

        Raises:
            ConfigError: a value is not finite or above ``bound``, or ``weight`` is not in ``0..max_weight``.
        """
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        if isinstance(weight, bool) or not isinstance(weight, int | np.integer) or not 0 <= weight <= self.max_weight:
            raise ConfigError(f"secure aggregation: weight must be an integer row count in 0..{self.max_weight}, "
                              f"got {weight!r}")
        if not np.isfinite(x).all():
            raise ConfigError("secure aggregation: the update holds NaN or infinite values; it cannot be summed")
        if x.size and float(np.abs(x).max()) > self.bound:
            raise ConfigError(
                f"secure aggregation: an update value of magnitude {float(np.abs(x).max()):.4g} is above the "
                f"agreed bound {self.bound}; raise the bound (and check the overflow capacity) or clip the update"
            )
        scaled = np.rint(x * (float(weight) * 2.0**self.frac_bits)).astype(np.int64)
        out = np.empty(x.size + 1, dtype=np.uint64)
        out[:-1] = scaled.view(np.uint64)
        out[-1] = np.uint64(weight)
        return out & self.mask

    def signed(self, total: np.ndarray) -> np.ndarray:
        """The signed integers (``int64``) in ``[-2^(k-1), 2^(k-1))`` congruent to ``total`` modulo ``2^k``."""
        t = np.asarray(total, dtype=np.uint64) & self.mask
        if self.bits == 64:
            return t.view(np.int64).copy()
        half = np.uint64(1 << (self.bits - 1))
        wide = t.astype(np.int64)
        return np.where(t >= half, wide - (1 << self.bits), wide)

    def decode(self, total: np.ndarray) -> tuple[np.ndarray, int]:
        """Read a sum of encoded vectors: ``(sum_i w_i x_i as float64, sum_i w_i)``."""
        s = self.signed(total)
        if s.size == 0:
            raise ConfigError("secure aggregation: an empty sum has no row count")
        return s[:-1].astype(np.float64) / 2.0**self.frac_bits, int(s[-1])
