"""The binning messages (type codes 0x0C01-0x0C05). Each checks its own shape; none carries a label, a value, a bin
edge or a row's bin.

The label party sends :class:`WoeHello` (its public key and slot width); a partner answers :class:`WoeShape` (per
attribute its number of fine bins and kind; its names only if it shares them). The label party sends
:class:`WoeLabels` (one ciphertext a row: ``1`` and the label packed side by side); the partner answers
:class:`WoeSums` (packed sums per fine bin: rows and events, but of each attribute not its largest bin, which the label
party derives from its totals). The label party ends with :class:`WoeClassing` (which fine bins merge, the WOE of each
coarse bin and each attribute's IV).

Example:
    >>> import numpy as np
    >>> WoeShape(bins=np.array([3, 4], np.uint16), kinds=np.zeros(2, np.uint8), names="").bins.tolist()
    [3, 4]
    >>> WoeShape(bins=np.array([1], np.uint16), kinds=np.zeros(1, np.uint8), names="")
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: WoeShape.bins: an attribute with fewer than 2 or more than 256 fine bins
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.he import MAX_MESSAGE_BYTES
from vsplit.protocol.message import Message, message, require, require_array

VERSION = 1
MAX_ROWS = 1 << 24
MAX_ATTRIBUTES = 100_000
#: the header of a ciphertext message (vsplit.he.wire)
CIPHER_HEADER_BYTES = 19


def _frame(owner: str, frame: np.ndarray) -> None:
    require_array(f"{owner}.frame", frame, dtype="uint8", ndim=1)
    require(CIPHER_HEADER_BYTES < len(frame) <= MAX_MESSAGE_BYTES and bytes(frame[:4]) == b"VHC1",
            f"{owner}.frame: {len(frame)} bytes, not a ciphertext message")


def _attributes(owner: str, name: str, value: np.ndarray, dtype: str) -> None:
    require_array(f"{owner}.{name}", value, dtype=dtype, ndim=1)
    require(0 < len(value) <= MAX_ATTRIBUTES, f"{owner}.{name}: {len(value)} attributes, not 1..{MAX_ATTRIBUTES}")


@message(0x0C01)
@dataclass(frozen=True)
class WoeHello(Message):
    """The label party's public key message (:meth:`vsplit.he.PublicKey.to_bytes`) and slot width."""

    version: int
    rows: int
    slot_bits: int
    key: np.ndarray

    def __post_init__(self) -> None:
        require(0 < self.rows <= MAX_ROWS, f"WoeHello.rows out of range: {self.rows}")
        require(2 <= self.slot_bits <= 63, f"WoeHello.slot_bits out of range: {self.slot_bits}")
        require_array("WoeHello.key", self.key, dtype="uint8", ndim=1)
        require(0 < len(self.key) <= 8192, f"WoeHello.key: {len(self.key)} bytes")


@message(0x0C02)
@dataclass(frozen=True)
class WoeShape(Message):
    """A partner's attributes: fine bins of each (the missing bin last), kind (0 numeric, 1 categorical) and, if it
    shares them, its names (one per line; empty: anonymous)."""

    bins: np.ndarray
    kinds: np.ndarray
    names: str

    def __post_init__(self) -> None:
        _attributes("WoeShape", "bins", self.bins, "uint16")
        require(int(self.bins.min()) >= 2 and int(self.bins.max()) <= 256,
                "WoeShape.bins: an attribute with fewer than 2 or more than 256 fine bins")
        _attributes("WoeShape", "kinds", self.kinds, "uint8")
        require(len(self.kinds) == len(self.bins) and int(self.kinds.max()) <= 1, "WoeShape.kinds: bad kinds")
        require(len(self.names) <= 1 << 20, "WoeShape.names: over 1 MiB")
        require(not self.names or len(self.names.split("\n")) == len(self.bins),
                "WoeShape.names: not one name per attribute")


@message(0x0C03)
@dataclass(frozen=True)
class WoeLabels(Message):
    """One ciphertext a row, in aligned-row order: the packed pair (1, label)."""

    frame: np.ndarray

    def __post_init__(self) -> None:
        _frame("WoeLabels", self.frame)


@message(0x0C04)
@dataclass(frozen=True)
class WoeSums(Message):
    """Packed (rows, events) sums per fine bin of every attribute, in order, leaving out of each attribute the bin
    ``skipped`` names (its largest: the label party derives it from its totals)."""

    frame: np.ndarray
    skipped: np.ndarray

    def __post_init__(self) -> None:
        _frame("WoeSums", self.frame)
        _attributes("WoeSums", "skipped", self.skipped, "int32")
        require(int(self.skipped.min()) >= 0 and int(self.skipped.max()) < 256, "WoeSums.skipped: out of range")


@message(0x0C05)
@dataclass(frozen=True)
class WoeClassing(Message):
    """Per attribute of the partner: each fine bin's coarse index (all attributes' fine bins in order), its number
    of coarse bins, the WOE of each coarse bin (in order) and its IV."""

    coarse: np.ndarray
    n_coarse: np.ndarray
    woe: np.ndarray
    iv: np.ndarray

    def __post_init__(self) -> None:
        require_array("WoeClassing.coarse", self.coarse, dtype="int32", ndim=1)
        _attributes("WoeClassing", "n_coarse", self.n_coarse, "uint16")
        require_array("WoeClassing.woe", self.woe, dtype="float64", ndim=1)
        require_array("WoeClassing.iv", self.iv, dtype="float64", ndim=1)
        require(len(self.woe) == int(self.n_coarse.sum()) and len(self.iv) == len(self.n_coarse),
                "WoeClassing: the WOE or IV do not match the coarse bins")
        require(bool(np.isfinite(self.woe).all() and np.isfinite(self.iv).all()), "WoeClassing: a WOE is not finite")
        require(len(self.coarse) <= 256 * MAX_ATTRIBUTES and (not len(self.coarse) or int(self.coarse.min()) >= 0),
                "WoeClassing.coarse: a negative coarse index")
