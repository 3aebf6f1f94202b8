"""Turn messages into frames and back, without pickle.

Theory of operation. A frame is a fixed 36-byte header, a small binary *meta* block with the message's scalar
fields and each array's dtype and shape, then the arrays' raw little-endian bytes, back to back::

    magic "VS" | version u8 | flags u8 | type u16 | reserved u16 | session id 16 B | sequence u64 | meta length u32
    meta: fixed part | strings          (at most 64 KiB)
    array buffers

The meta layout follows the message class's fields, so both sides know it from the type code alone (see
:class:`Layout`): the *fixed part* packs every ``int`` (i64), ``float`` (f64), ``bool`` (u8, 0 or 1) field in
declaration order, then per array a dtype code and a rank (u8 each) and four dimensions (u64 each, unused ones 0);
then comes each ``str`` field as a u32 byte count and UTF-8 bytes. The fixed part is one ``struct`` call each way,
which matters because a training step sends two frames and the codec's cost is paid on every one of them.

Decoding checks every byte count against the declared shapes before it reads, accepts only a fixed set of dtypes,
refuses non-finite floats, bools other than 0/1 and invalid UTF-8, and builds the message through its own
validating constructor. Nothing from a peer is ever unpickled or evaluated. Stream channels add a 4-byte length
prefix in front of each frame (see :mod:`.framing`).

Example:
    >>> import numpy as np
    >>> from vsplit.protocol.abort import Abort
    >>> frame = encode(Abort(code=2), session=b"s" * 16, seq=7)
    >>> header, msg = decode(frame)
    >>> (header.seq, msg.code)
    (7, 2)
"""

from __future__ import annotations

import math
import struct
import sys
from typing import NamedTuple

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.message import Message, fields_of, lookup

MAGIC = b"VS"
#: Wire protocol version; a peer with another version is refused. 2: binary meta block (1 had JSON).
WIRE_VERSION = 2
HEADER = struct.Struct("<2sBBHH16sQI")
HEADER_SIZE = HEADER.size
MAX_META = 64 * 1024
MAX_NDIM = 4
MAX_DIM = 2**40
SESSION_BYTES = 16

#: Array dtypes allowed on the wire, by name; all little-endian. The position in this table is the wire code, so
#: new dtypes are only ever appended (``uint16`` carries bfloat16 bit patterns, see
#: :mod:`vsplit.protocol.training.compression`).
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name).newbyteorder("<")
    for name in ("float32", "float64", "int64", "int32", "uint32", "uint8", "bool", "float16", "uint16", "int8")
}
_BY_CODE: tuple[np.dtype, ...] = tuple(DTYPES.values())
_CODE_OF: dict[np.dtype, int] = {dtype: code for code, dtype in enumerate(_BY_CODE)}
_NATIVE: tuple[np.dtype, ...] = tuple(dtype.newbyteorder("=") for dtype in _BY_CODE)
_STR_LEN = struct.Struct("<I")
_ZEROS = (0,) * MAX_NDIM
_BIG_ENDIAN_HOST = sys.byteorder == "big"
_SCALAR_CODES = {int: "q", float: "d", bool: "?"}


class Header(NamedTuple):
    """The envelope of a frame: which message, which run, in what order, and how long its meta block is."""

    version: int
    type_code: int
    session: bytes
    seq: int
    meta_len: int


class Layout:
    """The meta layout of one message class, computed once from its fields.

    >>> from vsplit.protocol.abort import Abort
    >>> layout_of(Abort).fixed.format
    '<q'
    """

    def __init__(self, cls: type[Message]) -> None:
        fields = fields_of(cls)
        kinds = [kind for _, kind in fields if kind in _SCALAR_CODES]
        self.cls = cls
        self.name = cls.__name__
        self.numbers = tuple(name for name, kind in fields if kind in _SCALAR_CODES)
        self.floats = tuple(i for i, kind in enumerate(kinds) if kind is float)
        self.bools = tuple(i for i, kind in enumerate(kinds) if kind is bool)
        self.arrays = tuple(name for name, kind in fields if kind is np.ndarray)
        self.strings = tuple(name for name, kind in fields if kind is str)
        codes = "".join(_SCALAR_CODES[kind] for kind in kinds)
        arrays = f"BB{MAX_NDIM}Q" * len(self.arrays)
        self.fixed = struct.Struct("<" + codes + arrays)
        #: header and fixed part in one struct, for the common case of a message without strings
        self.head_and_fixed = struct.Struct(HEADER.format + codes + arrays)
        self.head = (MAGIC, WIRE_VERSION, 0, cls.type_code, 0)
        # decoding reads bools as plain bytes so that anything but 0 or 1 can be refused
        self.fixed_in = struct.Struct("<" + codes.replace("?", "B") + arrays)


_LAYOUTS: dict[type, Layout] = {}


def layout_of(cls: type[Message]) -> Layout:
    """The (cached) :class:`Layout` of message class ``cls``."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = Layout(cls)
    return layout


def encode(msg: Message, *, session: bytes, seq: int) -> bytearray:
    """Encode ``msg`` as one frame for session ``session`` with sequence number ``seq``.

    The frame is a new ``bytearray`` that the caller owns: decoding a writable frame hands out arrays that are views
    of it instead of copies, which is what an in-memory channel wants.
    """
    if len(session) != SESSION_BYTES:
        raise ProtocolError(f"session id must be {SESSION_BYTES} bytes", local=True)
    layout = layout_of(type(msg))
    numbers = [getattr(msg, name) for name in layout.numbers]
    for i in layout.floats:
        if not math.isfinite(numbers[i]):
            raise ProtocolError(f"{layout.name}.{layout.numbers[i]}: non-finite float", local=True)
    buffers: list[bytes | np.ndarray] = [b""]  # header and meta, then each array (C-contiguous: its raw bytes)
    for name in layout.arrays:
        arr = np.ascontiguousarray(getattr(msg, name))
        code = _CODE_OF.get(arr.dtype)
        if code is None:  # not little-endian already, or not allowed at all
            code = _CODE_OF.get(arr.dtype.newbyteorder("<"))
            if code is not None:
                arr = arr.astype(_BY_CODE[code])
        if code is None or arr.ndim > MAX_NDIM:
            kind = f"a {arr.ndim}-d {arr.dtype} array"
            raise ProtocolError(f"{layout.name}.{name}: {kind} cannot go on the wire", local=True)
        numbers += (code, arr.ndim, *arr.shape, *_ZEROS[arr.ndim :])
        buffers.append(arr)
    try:
        if not layout.strings:
            buffers[0] = layout.head_and_fixed.pack(*layout.head, session, seq, layout.fixed.size, *numbers)
            return _join(buffers)
        meta = b"".join([layout.fixed.pack(*numbers), *_encode_strings(msg, layout)])
    except struct.error as exc:  # e.g. an int outside the 64-bit range the wire carries
        raise ProtocolError(f"{layout.name}: a field does not fit its wire type ({exc})", local=True) from None
    if len(meta) > MAX_META:
        raise ProtocolError(f"{layout.name}: header of {len(meta)} bytes is over {MAX_META}", local=True)
    buffers[0] = HEADER.pack(MAGIC, WIRE_VERSION, 0, msg.type_code, 0, session, seq, len(meta)) + meta
    return _join(buffers)


_join = bytearray().join


def _encode_strings(msg: Message, layout: Layout) -> list[bytes]:
    parts = []
    for name in layout.strings:
        text = getattr(msg, name).encode()
        parts += (_STR_LEN.pack(len(text)), text)
    return parts


def decode_header(frame: bytes | bytearray | memoryview) -> Header:
    """Read and check only the fixed header of ``frame``."""
    if len(frame) < HEADER_SIZE:
        raise ProtocolError(f"frame of {len(frame)} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, _flags, type_code, _reserved, session, seq, meta_len = HEADER.unpack_from(frame, 0)
    if magic != MAGIC:
        raise ProtocolError("frame does not start with the vsplit magic bytes")
    if version != WIRE_VERSION:
        raise ProtocolError(f"peer speaks wire version {version}, this side speaks {WIRE_VERSION}; upgrade one side")
    if meta_len > MAX_META or HEADER_SIZE + meta_len > len(frame):
        raise ProtocolError("frame header declares more metadata than the frame holds")
    return Header(version, type_code, session, seq, meta_len)


def decode(frame: bytes | bytearray | memoryview) -> tuple[Header, Message]:
    """Decode one frame into its header and a validated message.

    Raises :class:`ProtocolError` for anything malformed; never allocates more than ``len(frame)`` for arrays.
    """
    header = decode_header(frame)
    return header, decode_body(header, frame)


def decode_body(header: Header, frame: bytes | bytearray | memoryview) -> Message:
    """Decode the message of a frame whose ``header`` :func:`decode_header` has already read and checked."""
    cls = lookup(header.type_code)  # the registered class, even if a module was reloaded since the layout was cached
    layout = layout_of(cls)
    fixed = layout.fixed_in
    offset = HEADER_SIZE + fixed.size
    meta_end = HEADER_SIZE + header.meta_len
    if offset > meta_end:
        raise ProtocolError(f"{layout.name}: metadata of {header.meta_len} bytes is too short")
    numbers = fixed.unpack_from(frame, HEADER_SIZE)
    values: dict[str, object] = dict(zip(layout.numbers, numbers, strict=False))  # the rest describe arrays
    if layout.floats or layout.bools:
        _check_scalars(layout, values)
    if layout.strings:
        offset = _read_strings(layout, frame, offset, meta_end, values)
    if offset != meta_end:
        raise ProtocolError(f"{layout.name}: {meta_end - offset} unexpected bytes in the metadata")
    if layout.arrays:
        offset = _read_arrays(layout, numbers, frame, offset, values)
    if offset != len(frame):
        raise ProtocolError(f"{layout.name}: {len(frame) - offset} trailing bytes after the declared arrays")
    try:
        return layout.cls(**values)
    except ProtocolError:
        raise
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"{layout.name}: invalid field values ({exc})") from None


def _check_scalars(layout: Layout, values: dict[str, object]) -> None:
    for i in layout.floats:
        if not math.isfinite(values[layout.numbers[i]]):  # type: ignore[arg-type]
            raise ProtocolError(f"{layout.name}: field {layout.numbers[i]!r} must be a finite number")
    for i in layout.bools:
        name = layout.numbers[i]
        if values[name] not in (0, 1):
            raise ProtocolError(f"{layout.name}: field {name!r} must be a bool (0 or 1)")
        values[name] = values[name] == 1


def _read_strings(
    layout: Layout, frame: bytes | bytearray | memoryview, offset: int, meta_end: int, values: dict[str, object]
) -> int:
    for field in layout.strings:
        if offset + 4 > meta_end:
            raise ProtocolError(f"{layout.name}: metadata too short for field {field!r}")
        (size,) = _STR_LEN.unpack_from(frame, offset)
        if offset + 4 + size > meta_end:
            raise ProtocolError(f"{layout.name}: field {field!r} runs past the metadata")
        try:
            values[field] = bytes(frame[offset + 4 : offset + 4 + size]).decode()
        except UnicodeDecodeError:
            raise ProtocolError(f"{layout.name}: field {field!r} is not valid UTF-8") from None
        offset += 4 + size
    return offset


def _read_arrays(
    layout: Layout, numbers: tuple, frame: bytes | bytearray | memoryview, offset: int, values: dict[str, object]
) -> int:
    """Read the arrays the meta block describes from ``offset`` on; return the offset after the last one."""
    readonly = memoryview(frame).readonly
    pos = len(layout.numbers)
    for name in layout.arrays:
        code, ndim, dims = numbers[pos], numbers[pos + 1], numbers[pos + 2 : pos + 2 + MAX_NDIM]
        pos += 2 + MAX_NDIM
        if code >= len(_BY_CODE) or ndim > MAX_NDIM:
            raise ProtocolError(f"{layout.name}.{name}: dtype code {code} / rank {ndim} not allowed on the wire")
        if dims[ndim:] != _ZEROS[ndim:] or max(dims) >= MAX_DIM:
            raise ProtocolError(f"{layout.name}.{name}: bad shape {dims} for rank {ndim}")
        shape = dims[:ndim]
        dtype = _BY_CODE[code]
        count = math.prod(shape)
        if count == 0 and math.prod(d or 1 for d in shape) >= MAX_DIM:  # numpy refuses such shapes even when empty
            raise ProtocolError(f"{layout.name}.{name}: bad shape {shape}: empty, but with huge dimensions")
        nbytes = count * dtype.itemsize
        if offset + nbytes > len(frame):
            have = len(frame) - offset
            raise ProtocolError(f"{layout.name}.{name}: shape {shape} needs {nbytes} bytes, frame has {have}")
        arr = np.ndarray(shape, dtype, frame, offset)  # a view of the frame's bytes
        if readonly:
            arr = arr.copy()  # a writable array that owns its memory
        values[name] = arr.astype(_NATIVE[code]) if _BIG_ENDIAN_HOST else arr
        offset += nbytes
    return offset
