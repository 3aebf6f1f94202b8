"""Turn messages into frames and back, without pickle.

Theory of operation. A frame is a fixed 36-byte header, a small JSON object with the message's scalar fields and
the dtype and shape of each array field, then the arrays' raw little-endian bytes, back to back::

    magic "VS" | version u8 | flags u8 | type u16 | reserved u16 | session id 16 B | sequence u64 | meta length u32
    meta (UTF-8 JSON, at most 64 KiB)
    array buffers

Decoding checks every byte count against the declared shapes before it reads, accepts only a fixed set of dtypes,
and builds the message through its own validating constructor. JSON is parsed, never evaluated, and nothing from a
peer is ever unpickled. Stream channels add a 4-byte length prefix in front of each frame (see :mod:`.framing`).

Example:
    >>> import numpy as np
    >>> from vsplit.protocol.abort import Abort
    >>> frame = encode(Abort(code=2), session=b"s" * 16, seq=7)
    >>> header, msg = decode(frame)
    >>> (header.seq, msg.code)
    (7, 2)
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.message import Message, fields_of, lookup

MAGIC = b"VS"
#: Wire protocol version; a peer with another version is refused.
WIRE_VERSION = 1
HEADER = struct.Struct("<2sBBHH16sQI")
HEADER_SIZE = HEADER.size
MAX_META = 64 * 1024
MAX_NDIM = 4
SESSION_BYTES = 16

#: Array dtypes allowed on the wire, by name; all little-endian.
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name).newbyteorder("<")
    for name in ("float32", "float64", "int64", "int32", "uint32", "uint8", "bool")
}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


@dataclass(frozen=True)
class Header:
    """The envelope of a frame: who, which run, which message, in what order."""

    version: int
    type_code: int
    session: bytes
    seq: int


def encode(msg: Message, *, session: bytes, seq: int) -> bytes:
    """Encode ``msg`` as one frame for session ``session`` with sequence number ``seq``."""
    return b"".join(encode_parts(msg, session=session, seq=seq))


def encode_parts(msg: Message, *, session: bytes, seq: int) -> list[bytes | memoryview]:
    """Like :func:`encode` but as a list of buffers, so a socket can send them without joining."""
    if len(session) != SESSION_BYTES:
        raise ProtocolError(f"session id must be {SESSION_BYTES} bytes", local=True)
    scalars: dict[str, object] = {}
    arrays: list[list[object]] = []
    buffers: list[memoryview] = []
    for name, kind in fields_of(type(msg)):
        value = getattr(msg, name)
        if kind is np.ndarray:
            arr = np.ascontiguousarray(value)
            dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in ("|", "=", "<") else arr.dtype
            name_of_dtype = _DTYPE_NAMES.get(np.dtype(dtype).newbyteorder("<"))
            if name_of_dtype is None:
                raise ProtocolError(f"{type(msg).__name__}.{name}: dtype {arr.dtype} cannot go on the wire", local=True)
            arr = arr.astype(DTYPES[name_of_dtype], copy=False)
            arrays.append([name, name_of_dtype, list(arr.shape)])
            buffers.append(memoryview(arr.reshape(-1)).cast("B"))  # reshape: a (0, n) array cannot be cast
        else:
            if isinstance(value, float) and not math.isfinite(value):
                raise ProtocolError(f"{type(msg).__name__}.{name}: non-finite float", local=True)
            scalars[name] = value
    meta = json.dumps({"f": scalars, "a": arrays}, separators=(",", ":")).encode()
    if len(meta) > MAX_META:
        raise ProtocolError(f"{type(msg).__name__}: header of {len(meta)} bytes is over {MAX_META}", local=True)
    head = HEADER.pack(MAGIC, WIRE_VERSION, 0, msg.type_code, 0, session, seq, len(meta))
    return [head, meta, *buffers]


def decode_header(frame: bytes | bytearray | memoryview) -> Header:
    """Read and check only the fixed header of ``frame``."""
    if len(frame) < HEADER_SIZE:
        raise ProtocolError(f"frame of {len(frame)} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, _flags, type_code, _reserved, session, seq, _meta_len = HEADER.unpack_from(frame, 0)
    if magic != MAGIC:
        raise ProtocolError("frame does not start with the vsplit magic bytes")
    if version != WIRE_VERSION:
        raise ProtocolError(f"peer speaks wire version {version}, this side speaks {WIRE_VERSION}; upgrade one side")
    return Header(version=version, type_code=type_code, session=bytes(session), seq=seq)


def decode(frame: bytes | bytearray | memoryview) -> tuple[Header, Message]:
    """Decode one frame into its header and a validated message.

    Raises :class:`ProtocolError` for anything malformed; never allocates more than ``len(frame)`` for arrays.
    """
    header = decode_header(frame)
    cls = lookup(header.type_code)
    meta_len = HEADER.unpack_from(frame, 0)[-1]
    if meta_len > MAX_META or HEADER_SIZE + meta_len > len(frame):
        raise ProtocolError("frame header declares more metadata than the frame holds")
    view = memoryview(frame)
    try:
        meta = json.loads(bytes(view[HEADER_SIZE : HEADER_SIZE + meta_len]), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # ValueError: also over-long int literals, NaN/Infinity
        raise ProtocolError(f"frame metadata is not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(meta, dict) or set(meta) != {"f", "a"}:
        raise ProtocolError("frame metadata has the wrong layout")
    scalars, arrays = meta["f"], meta["a"]
    if not isinstance(scalars, dict) or not isinstance(arrays, list):
        raise ProtocolError("frame metadata has the wrong layout")
    expected = fields_of(cls)
    array_names = [name for name, kind in expected if kind is np.ndarray]
    if [a[0] if isinstance(a, list) and a else None for a in arrays] != array_names:
        raise ProtocolError(f"{cls.__name__}: array fields {array_names} expected")
    values: dict[str, object] = {}
    for name, kind in expected:
        if kind is np.ndarray:
            continue
        if name not in scalars:
            raise ProtocolError(f"{cls.__name__}: field {name!r} missing")
        value = scalars[name]
        if kind is float and type(value) is int:
            value = float(value) if abs(value) <= _MAX_FLOAT_INT else math.inf
        if type(value) is not kind:
            raise ProtocolError(f"{cls.__name__}: field {name!r} must be {kind.__name__}")
        if kind is float and not math.isfinite(value):
            raise ProtocolError(f"{cls.__name__}: field {name!r} must be a finite number")
        values[name] = value
    if len(scalars) != len(expected) - len(array_names):
        raise ProtocolError(f"{cls.__name__}: unexpected fields in frame")
    offset = HEADER_SIZE + meta_len
    writable = view if not view.readonly else None
    for entry in arrays:
        values[entry[0]], offset = _read_array(cls.__name__, entry, frame, writable, offset)
    if offset != len(frame):
        raise ProtocolError(f"{cls.__name__}: {len(frame) - offset} trailing bytes after the declared arrays")
    try:
        return header, cls(**values)
    except ProtocolError:
        raise
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"{cls.__name__}: invalid field values ({exc})") from None


_MAX_FLOAT_INT = int(np.finfo(np.float64).max)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed on the wire")


def _read_array(
    owner: str, entry: list, frame: bytes | bytearray | memoryview, writable: memoryview | None, offset: int
) -> tuple[np.ndarray, int]:
    if len(entry) != 3:
        raise ProtocolError(f"{owner}: malformed array descriptor")
    name, dtype_name, shape = entry
    dtype = DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
    if dtype is None:
        raise ProtocolError(f"{owner}.{name}: dtype {dtype_name!r} not allowed on the wire")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_NDIM
        or not all(type(n) is int and 0 <= n < 2**40 for n in shape)
    ):
        raise ProtocolError(f"{owner}.{name}: bad shape {shape!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if offset + nbytes > len(frame):
        raise ProtocolError(f"{owner}.{name}: shape {shape} needs {nbytes} bytes, frame has {len(frame) - offset}")
    source = writable if writable is not None else frame
    arr = np.frombuffer(source, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
    if writable is None:
        arr = arr.copy()  # a writable array that owns its memory; the frame may be reused by the transport
    return arr.astype(dtype.newbyteorder("="), copy=False), offset + nbytes
