"""Fixed-point numbers packed side by side into one plaintext, with headroom for sums.

Theory of operation: a value ``v`` (a gradient, a hessian, a 0/1 label) becomes the integer ``round(v * scale)``,
with ``|v| <= bound``. The ``k`` values of one row go into one plaintext as ``sum_j x_j * 2**(w*j)``: signed digits
of ``w`` bits, no offsets. Adding plaintexts adds digit by digit, so a sum over up to ``max_rows`` rows stays exact
as long as each digit's sum fits ``w`` bits signed: ``w = bit_length(max_rows * round(bound * scale)) + 1``. The same
holds one level up: several group sums (``k*w`` bits each) packed into one plaintext are just more digits, so one
decryption returns them all (SecureBoost+). :meth:`Packing.unpack` peels the digits off, lowest first, borrowing
one from the next digit when a digit is negative, which is how two's complement carries through sums.

Example:
    >>> import numpy as np
    >>> p = Packing.plan(scale=1000, bounds=(1.0, 0.25), max_rows=100, plaintext_bits=600)
    >>> p.slot_bits, p.sums_per_plaintext
    (18, 16)
    >>> rows = np.array([[0.5, 0.25], [-0.75, 0.125]])
    >>> packed = p.pack(rows)
    >>> p.unpack(np.array([packed.sum()], dtype=object), count=1)
    array([[-250,  375]])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ConfigError, DataError


@dataclass(frozen=True)
class Packing:
    """How a row's values become one plaintext, and how many group sums share one plaintext on the way back.

    Build it with :meth:`plan`; both parties need only ``slot_bits`` and ``slots`` (the label party sends them).
    """

    scale: int
    bounds: tuple[float, ...]
    max_rows: int
    slot_bits: int
    plaintext_bits: int

    @property
    def slots(self) -> int:
        """Values per row (e.g. 2: gradient and hessian)."""
        return len(self.bounds)

    @property
    def sums_per_plaintext(self) -> int:
        """Group sums that one plaintext holds on the way back (each ``slots * slot_bits`` bits)."""
        return self.plaintext_bits // (self.slots * self.slot_bits)

    @classmethod
    def plan(cls, *, scale: int, bounds: tuple[float, ...], max_rows: int, plaintext_bits: int) -> Packing:
        """Size the slots for sums of up to ``max_rows`` rows of values within ``bounds`` (one per slot).

        Raises:
            ConfigError: the numbers do not fit the key's plaintext space (or a digit would exceed 63 bits).
        """
        if not isinstance(scale, int) or scale < 1:
            raise ConfigError(f"he packing: scale = {scale!r}; use a positive integer such as 2**20")
        if not bounds or any(not (math.isfinite(b) and b > 0) for b in bounds):
            raise ConfigError(f"he packing: bounds = {bounds!r}; give one positive finite bound per value of a row")
        if max_rows < 1:
            raise ConfigError(f"he packing: max_rows = {max_rows}; use the number of rows a sum can cover")
        largest = math.ceil(max(bounds) * scale)
        slot_bits = (max_rows * largest).bit_length() + 1
        if slot_bits > 63:
            raise ConfigError(f"he packing: sums of {max_rows} rows of |value| <= {max(bounds)} at scale {scale} "
                              f"need {slot_bits}-bit digits, more than 63; lower the scale")
        if slot_bits * len(bounds) > plaintext_bits:
            raise ConfigError(f"he packing: {len(bounds)} values of {slot_bits} bits do not fit a "
                              f"{plaintext_bits}-bit plaintext; lower the scale or max_rows, or use a larger key")
        return cls(scale=scale, bounds=tuple(float(b) for b in bounds), max_rows=max_rows, slot_bits=slot_bits,
                   plaintext_bits=plaintext_bits)

    def to_integers(self, values: np.ndarray) -> np.ndarray:
        """``round(values * scale)`` as int64, shape ``(rows, slots)``, after checking shape, finiteness and bounds.

        Raises:
            DataError: a value is not finite or exceeds its bound, or the shape does not match.
        """
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == 1 and self.slots == 1:
            values = values[:, None]
        if values.ndim != 2 or values.shape[1] != self.slots:
            raise DataError(f"he packing: values of shape {values.shape}; expected (rows, {self.slots})")
        if len(values) > self.max_rows:
            raise DataError(f"he packing: {len(values)} rows; this packing was planned for {self.max_rows}")
        if not np.isfinite(values).all():
            raise DataError("he packing: a value is NaN or infinite; clip or fix the column before encrypting")
        over = np.abs(values) > np.asarray(self.bounds)
        if over.any():
            slot = int(np.nonzero(over.any(axis=0))[0][0])
            raise DataError(f"he packing: a value of slot {slot} exceeds its bound {self.bounds[slot]}; clip it "
                            "or plan a larger bound")
        return np.rint(values * self.scale).astype(np.int64)

    def pack(self, values: np.ndarray) -> np.ndarray:
        """One Python integer a row (numpy object array): the row's values as signed ``slot_bits``-bit digits."""
        ints = self.to_integers(values)
        packed = ints[:, 0].astype(object)
        for slot in range(1, self.slots):  # a loop over slots, not rows
            packed = packed + (ints[:, slot].astype(object) << (self.slot_bits * slot))
        return packed

    def unpack(self, packed: np.ndarray, *, count: int, sums_per_plaintext: int = 1) -> np.ndarray:
        """Exact int64 sums, shape ``(count, slots)``, from decrypted plaintexts holding ``sums_per_plaintext`` each.

        A digit that overflowed cannot be detected here; :meth:`plan` sizes the digits so that none can.
        """
        digits = self.slots * sums_per_plaintext
        rest = np.asarray(packed, dtype=object)
        mask, half, base = (1 << self.slot_bits) - 1, 1 << (self.slot_bits - 1), 1 << self.slot_bits
        out = np.empty((len(rest), digits), dtype=np.int64)
        for digit in range(digits):  # a loop over digits, not rows
            low = rest & mask
            low = np.where(low >= half, low - base, low)
            out[:, digit] = low.astype(np.int64)
            rest = (rest - low) >> self.slot_bits
        return out.reshape(-1, self.slots)[:count]

    def rescale(self, sums: np.ndarray) -> np.ndarray:
        """Integer sums back to float: ``sums / scale``."""
        return np.asarray(sums, dtype=np.float64) / self.scale
