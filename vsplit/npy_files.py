"""Reading ``.npy`` and ``.npz`` files that may be damaged, never allocating more than the file holds.

``numpy.load`` trusts an array's header: a flipped byte in its shape makes it allocate terabytes before it finds the
data missing. These readers check every array's declared size against the bytes actually stored, refuse anything
pickled or compressed, and raise :class:`ValueError` (or what :mod:`zipfile` raises) for whatever they refuse, so the
caller turns it into an error naming its file.

Example:
    >>> import io
    >>> buffer = io.BytesIO(); np.save(buffer, np.arange(3)); raw = buffer.getvalue()
    >>> read_npy(io.BytesIO(raw), len(raw)).tolist()
    [0, 1, 2]
    >>> read_npy(io.BytesIO(raw.replace(b"(3,)", b"(9,)")), len(raw))
    Traceback (most recent call last):
    ...
    ValueError: the array declares int64[9], more than the 24 bytes it holds
"""

from __future__ import annotations

import io
import math
import warnings
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np


def read_npy(data: BinaryIO, size: int) -> np.ndarray:
    """The array in ``data`` (an ``.npy`` of ``size`` bytes), checked to hold as many bytes as its header declares."""
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns of headers in Python 2's format, then parses them as text
            shape, _, dtype = (npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0)(data)
    except Exception as exc:  # the header is Python-literal text: its parser raises SyntaxError, TokenError, ...
        raise ValueError(f"unreadable array header ({type(exc).__name__}: {exc})") from None
    held = size - data.tell()
    if dtype.hasobject:
        raise ValueError(f"the array holds Python objects ({dtype}), which are never unpickled")
    if math.prod(shape) * dtype.itemsize > held:
        raise ValueError(f"the array declares {dtype}{list(shape)}, more than the {held} bytes it holds")
    data.seek(0)
    return npy.read_array(data, allow_pickle=False)


def read_npy_file(path: Path) -> np.ndarray:
    """The array in the ``.npy`` file ``path`` (see :func:`read_npy`)."""
    raw = Path(path).read_bytes()
    return read_npy(io.BytesIO(raw), len(raw))


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path`` by name: each entry must be a stored (uncompressed, as ``np.savez``
    writes them) ``.npy`` no bigger than the file, holding what its header declares."""
    arrays: dict[str, np.ndarray] = {}
    limit = Path(path).stat().st_size
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED or info.file_size > limit or not info.filename.endswith(".npy"):
                raise ValueError(f"entry {info.filename!r} is not a stored .npy array")
            try:
                arrays[info.filename.removesuffix(".npy")] = read_npy(io.BytesIO(archive.read(info)), info.file_size)
            except ValueError as exc:
                raise ValueError(f"entry {info.filename!r}: {exc}") from None
    return arrays


__all__ = ["read_npy", "read_npy_file", "read_npz"]
