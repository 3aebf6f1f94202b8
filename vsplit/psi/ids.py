"""ID hygiene: how a raw ID value becomes the exact bytes both parties hash.

Both parties must turn equal customers into equal bytes, or the intersection silently shrinks. The rules:

* ``str`` IDs are used as given, then (by default) Unicode NFC-normalised and stripped of surrounding whitespace;
  case folding is opt-in. Leading zeros matter: ``"00123"`` and ``"123"`` are different IDs.
* ``int`` IDs (Python or NumPy integers, not ``bool``) become their decimal text, so ``123`` matches ``"123"``.
* Anything else - ``None``, NaN, floats (``1.0`` or ``1``?), bytes - is refused with a :class:`DataError` that
  names the row and the fix, and so is an ID that is empty after normalisation.
* Duplicates (equal after normalisation) raise :class:`AlignmentError` under ``dedupe="error"`` (the default) or
  keep their first row under ``dedupe="first"``.

The normalisation settings travel in the PSI handshake: parties that normalise differently are refused.

Example:
    >>> policy = IdPolicy(casefold=True)
    >>> [normalise_id(v, policy=policy) for v in ["  Anna ", 42]]
    ['anna', '42']
    >>> policy.spec
    'nfc=1,strip=1,casefold=1'
"""

from __future__ import annotations

import numbers
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vsplit.errors import ConfigError, DataError

#: Accepted duplicate policies.
DEDUPE_POLICIES = ("error", "first")


@dataclass(frozen=True)
class IdPolicy:
    """How IDs are normalised and what happens to duplicates.

    Args:
        strip: remove leading and trailing whitespace.
        casefold: compare case-insensitively (``str.casefold``).
        nfc: apply Unicode NFC normalisation, so composed and decomposed accents match.
        dedupe: ``"error"`` refuses duplicate IDs; ``"first"`` keeps the first row of each and drops the rest.
    """

    strip: bool = True
    casefold: bool = False
    nfc: bool = True
    dedupe: Literal["error", "first"] = "error"

    def __post_init__(self) -> None:
        if self.dedupe not in DEDUPE_POLICIES:
            raise ConfigError(f"psi.duplicates: {self.dedupe!r} is not one of {', '.join(DEDUPE_POLICIES)}")

    @property
    def spec(self) -> str:
        """The normalisation settings as compact text; both parties' specs must be equal."""
        return f"nfc={int(self.nfc)},strip={int(self.strip)},casefold={int(self.casefold)}"


def normalise_id(value: object, *, policy: IdPolicy, row: int | None = None) -> str:
    """Return the canonical text of one ID value; raise :class:`DataError` naming ``row`` if it is unusable.

    >>> normalise_id(" 7 ", policy=IdPolicy())
    '7'
    >>> normalise_id(None, policy=IdPolicy(), row=3)
    Traceback (most recent call last):
    ...
    vsplit.errors.DataError: ID at row 3 is missing; drop rows without an ID before aligning
    """
    if type(value) is str:
        text = value
    else:
        text = _coerce(value, row)
    if policy.nfc and not text.isascii():
        text = unicodedata.normalize("NFC", text)
    if policy.strip:
        text = text.strip()
    if policy.casefold:
        text = text.casefold()
    if not text:
        raise DataError(f"ID at {_where(row)} is empty; drop rows without an ID before aligning")
    return text


def encode_batch(values: Sequence[object], *, policy: IdPolicy, first_row: int) -> list[bytes]:
    """Normalise and UTF-8 encode a batch of raw IDs whose first element is row ``first_row``.

    >>> encode_batch(["a ", 5], policy=IdPolicy(), first_row=0)
    [b'a', b'5']
    """
    if policy == _DEFAULT and all(type(v) is str and v.isascii() for v in values):
        out = [v.strip().encode() for v in values]
        if all(out):
            return out
    return [normalise_id(v, policy=policy, row=first_row + i).encode() for i, v in enumerate(values)]


_DEFAULT = IdPolicy()
_MISSING = ("NAType", "NaTType")


def _coerce(value: object, row: int | None) -> str:
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise DataError(f"ID at {_where(row)} is a bool; use an ID column of int or str")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if value is None or (isinstance(value, float) and value != value) or type(value).__name__ in _MISSING:
        raise DataError(f"ID at {_where(row)} is missing; drop rows without an ID before aligning")
    if isinstance(value, numbers.Real):
        raise DataError(
            f"ID at {_where(row)} is a float; float IDs are ambiguous (1.0 or 1?): cast the ID column to int or str"
        )
    raise DataError(f"ID at {_where(row)} has type {type(value).__name__}; IDs must be str or int")


def _where(row: int | None) -> str:
    return f"row {row}" if row is not None else "an unknown row"
