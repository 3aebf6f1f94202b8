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
import struct
import warnings
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np


def read_npy(data: BinaryIO, size: int, *, exact: bool = False) -> np.ndarray:
    """The array in ``data`` (an ``.npy`` of ``size`` bytes), checked to hold as many bytes as its header declares
    (``exact``: no more either)."""
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
    if exact and math.prod(shape) * dtype.itemsize != held:
        raise ValueError(f"the array declares {dtype}{list(shape)}, less than the {held} bytes it holds")
    data.seek(0)
    return npy.read_array(data, allow_pickle=False)


def read_npy_file(path: Path) -> np.ndarray:
    """The array in the ``.npy`` file ``path`` (see :func:`read_npy`)."""
    raw = Path(path).read_bytes()
    return read_npy(io.BytesIO(raw), len(raw))


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path`` by name: each entry must be a stored (uncompressed, as ``np.savez``
    writes them) ``.npy`` holding exactly what its header declares, and the entries must lie side by side in the
    file, none overlapping another or reaching past the central directory (:func:`check_layout`), all checked
    before any array is read: what the arrays take in memory never exceeds the file's size."""
    arrays: dict[str, np.ndarray] = {}
    with open(path, "rb") as raw, zipfile.ZipFile(raw) as archive:
        infos = archive.infolist()
        check_layout(raw, infos, end=archive.start_dir)
        for info in infos:
            try:
                arrays[info.filename.removesuffix(".npy")] = read_npy(io.BytesIO(archive.read(info)), info.file_size,
                                                                      exact=True)
            except ValueError as exc:
                raise ValueError(f"entry {info.filename!r}: {exc}") from None
    return arrays


def check_layout(raw: BinaryIO, infos: list[zipfile.ZipInfo], *, end: int) -> None:
    """Refuse an archive whose entries are not stored ``.npy`` files lying side by side before ``end`` (where its
    central directory starts): an entry that overlaps another, or declares more bytes than lie between its local
    header and the next entry, lets a small file expand into any number of arrays (a zip bomb)."""
    names: set[str] = set()
    spans: list[tuple[int, int, str]] = []
    for info in infos:
        name = info.filename
        if info.compress_type != zipfile.ZIP_STORED or not name.endswith(".npy"):
            raise ValueError(f"entry {name!r} is not a stored .npy array")
        if name in names:
            raise ValueError(f"entry {name!r} appears twice")
        names.add(name)
        if info.file_size != info.compress_size:
            raise ValueError(f"entry {name!r} declares {info.file_size} bytes but stores {info.compress_size}")
        raw.seek(info.header_offset)
        local = raw.read(_LOCAL.size)
        if len(local) != _LOCAL.size or local[:4] != b"PK\x03\x04":
            raise ValueError(f"entry {name!r}: no local header at offset {info.header_offset}")
        fields = _LOCAL.unpack(local)
        start = info.header_offset + _LOCAL.size + fields[-2] + fields[-1]  # + the name and the extra field
        spans.append((info.header_offset, start + info.compress_size, name))
    reached, previous = 0, ""
    for begin, stop, name in sorted(spans):
        if begin < reached:
            raise ValueError(f"entry {name!r} overlaps entry {previous!r}")
        if stop > end:
            raise ValueError(f"entry {name!r} declares more bytes than the file holds before its directory")
        reached, previous = stop, name


#: a zip local file header: signature, versions, flags, method, time, date, CRC, sizes, name and extra lengths
_LOCAL = struct.Struct("<4s2B4HL2L2H")


__all__ = ["check_layout", "read_npy", "read_npy_file", "read_npz"]
