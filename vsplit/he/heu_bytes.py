"""sf-heu's own byte format, read only from this process and written only from checked integers.

Theory of operation: sf-heu serialises keys and ciphertext arrays with msgpack (no code runs on load), but its loader
trusts what it reads. Fed a peer's bytes it raises half a dozen exception types, allocates what a length field claims
(``MemoryError``), and a public key's ``max_plaintext`` bit count sizes a precomputed table, so one forged number costs
minutes of CPU and gigabytes. vsplit therefore never hands a peer's bytes to sf-heu: the wire carries plain
fixed-width integers (:mod:`vsplit.he.wire`), checked there, and this module rebuilds sf-heu's bytes from them.

The layout (sf-heu 0.5.2b0): an integer is little-endian magnitude bytes whose last byte's top bit is the sign; a
ciphertext is ``msgpack([int]) + u64le(schema)``; a 1-D array is ``msgpack([rows, 1, 1, [ciphertext bytes, ...]])``;
a public key is ``msgpack([n, G, H, max_plain_bits]) + u64le(1)`` (OU) or ``msgpack([n, h_s]) + u64le(4)`` (Paillier).
Zero-padded magnitudes load as the same number, which lets the rebuild be one numpy matrix, no loop per row.

Example:
    >>> _mp_bytes(255).hex(), _mp_value(_mp_bytes(255))
    ('ff00', 255)
"""

from __future__ import annotations

import struct

import numpy as np

#: sf-heu's SchemaType values, which it also writes after each ciphertext and key
SCHEMA_CODE = {"ou": 1, "paillier": 4}


def _mp_bytes(value: int) -> bytes:
    """sf-heu's encoding of a non-negative integer (minimal, as sf-heu writes it)."""
    return value.to_bytes(value.bit_length() // 8 + 1, "little")


def _mp_value(data: bytes) -> int:
    """Read sf-heu's integer encoding (sign in the top bit of the last byte)."""
    if not data:
        return 0
    value = int.from_bytes(data, "little")
    sign_bit = 1 << (8 * len(data) - 1)
    return -(value ^ sign_bit) if value & sign_bit else value


class _Reader:
    """A cursor over msgpack bytes that sf-heu wrote in this process (never a peer's)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated sf-heu bytes")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def _int(self, n: int) -> int:
        return int.from_bytes(self._take(n), "big")

    def uint(self) -> int:
        tag = self._take(1)[0]
        if tag < 0x80:
            return tag
        sizes = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
        if tag not in sizes:
            raise ValueError(f"expected an unsigned integer, got tag {tag:#x}")
        return self._int(sizes[tag])

    def array(self) -> int:
        tag = self._take(1)[0]
        if 0x90 <= tag <= 0x9F:
            return tag & 0x0F
        if tag in (0xDC, 0xDD):
            return self._int(2 if tag == 0xDC else 4)
        raise ValueError(f"expected an array, got tag {tag:#x}")

    def raw(self) -> bytes:
        tag = self._take(1)[0]
        if 0xA0 <= tag <= 0xBF:
            return self._take(tag & 0x1F)
        sizes = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}
        if tag not in sizes:
            raise ValueError(f"expected a string, got tag {tag:#x}")
        return self._take(self._int(sizes[tag]))


def _uint(value: int) -> bytes:
    if value < 0x80:
        return bytes([value])
    for tag, fmt in ((0xCC, ">B"), (0xCD, ">H"), (0xCE, ">I")):
        if value < 1 << (8 * struct.calcsize(fmt)):
            return bytes([tag]) + struct.pack(fmt, value)
    return b"\xcf" + struct.pack(">Q", value)


def _array(count: int) -> bytes:
    if count < 16:
        return bytes([0x90 | count])
    return b"\xdc" + struct.pack(">H", count) if count < 1 << 16 else b"\xdd" + struct.pack(">I", count)


def _raw(data: bytes) -> bytes:
    return _raw_header(len(data)) + data


def _raw_header(length: int) -> bytes:
    if length < 32:
        return bytes([0xA0 | length])
    if length < 1 << 8:
        return b"\xd9" + bytes([length])
    return b"\xda" + struct.pack(">H", length) if length < 1 << 16 else b"\xdb" + struct.pack(">I", length)


def _tail(scheme: str) -> bytes:
    return struct.pack("<Q", SCHEMA_CODE[scheme])


def ciphertexts_to_matrix(data: bytes, *, width: int) -> np.ndarray:
    """Turn sf-heu's bytes of a 1-D ciphertext array (made here) into a ``(count, width)`` big-endian uint8 matrix.

    sf-heu writes the ciphertexts at varying lengths, so one loop walks their headers (a few byte reads each); the
    magnitudes are then gathered into the matrix by numpy at once. The sender's side only.
    """
    reader = _Reader(data)
    if reader.array() != 4:
        raise ValueError("not a ciphertext array")
    rows, _cols, ndim, count = reader.uint(), reader.uint(), reader.uint(), reader.array()
    if ndim != 1 or count != rows:
        raise ValueError("only 1-D ciphertext arrays are sent")
    starts, lengths = [0] * count, [0] * count
    pos = reader.pos
    for i in range(count):  # a loop over headers only, the usual header inline (a call costs as much as the rest)
        tag = data[pos]
        if tag in _RAW16:  # the element: msgpack [integer] + 8-byte schema, 256 to 65535 bytes
            pos, size = pos + 3, (data[pos + 1] << 8) | data[pos + 2]
        else:
            pos, size = _raw_at(data, pos)
        if data[pos] != 0x91:
            raise ValueError("not a ciphertext")
        tag = data[pos + 1]
        if tag in _RAW16:
            starts[i], lengths[i] = pos + 4, (data[pos + 2] << 8) | data[pos + 3]
        else:
            starts[i], lengths[i] = _raw_at(data, pos + 1)
        pos += size
    starts, lengths = np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)
    if count and (lengths.max() > width + 1 or lengths.min() < 1):
        raise ValueError("a ciphertext wider than the key")
    buffer = np.frombuffer(data, dtype=np.uint8)
    span = int(lengths.max()) if count else 0
    take = np.arange(span)
    valid = take[None, :] < lengths[:, None]
    little = np.where(valid, buffer[np.minimum(starts[:, None] + take, len(buffer) - 1)], 0)
    last = little[np.arange(count), lengths - 1] if count else little[:, :0]
    if count and ((last & 0x80).any() or (little[:, width:] != 0).any()):
        raise ValueError("a negative or oversized ciphertext")
    out = np.zeros((count, width), dtype=np.uint8)
    out[:, width - min(span, width) :] = little[:, : min(span, width)][:, ::-1]
    return out


_RAW16 = frozenset((0xDA, 0xC5))  # msgpack str 16 and bin 16: a two-byte length follows


def _raw_at(data: bytes, pos: int) -> tuple[int, int]:
    """The start and length of the msgpack string or binary at ``pos``."""
    tag = data[pos]
    if 0xA0 <= tag <= 0xBF:
        return pos + 1, tag & 0x1F
    size = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}.get(tag)
    if size is None:
        raise ValueError(f"expected a string, got tag {tag:#x}")
    return pos + 1 + size, int.from_bytes(data[pos + 1 : pos + 1 + size], "big")


def matrix_to_ciphertexts(matrix: np.ndarray, *, scheme: str) -> bytes:
    """Rebuild sf-heu's bytes of a 1-D ciphertext array from a checked ``(count, width)`` big-endian uint8 matrix."""
    count, width = matrix.shape
    inner = _array(1) + _raw_header(width + 1)  # the integer: width magnitude bytes and a zero sign byte
    element_length = len(inner) + width + 1 + 8
    head = np.frombuffer(_raw_header(element_length) + inner, dtype=np.uint8)
    tail = np.frombuffer(b"\x00" + _tail(scheme), dtype=np.uint8)
    rows = np.empty((count, head.size + width + tail.size), dtype=np.uint8)
    rows[:, : head.size] = head
    rows[:, head.size : head.size + width] = matrix[:, ::-1]  # big-endian on the wire, little-endian for sf-heu
    rows[:, head.size + width :] = tail
    return _array(4) + _uint(count) + _uint(1) + _uint(1) + _array(count) + rows.tobytes()


def public_key_fields(data: bytes, *, scheme: str) -> list[int]:
    """The integers of sf-heu's public-key bytes made here: ``[n, G, H, max_plain_bits]`` or ``[n, h_s]``."""
    reader = _Reader(data)
    size = reader.array()
    fields = [_mp_value(reader.raw()) for _ in range(3 if scheme == "ou" else size)]
    if scheme == "ou":
        fields.append(reader.uint())
    return fields


def public_key_bytes(fields: list[int], *, scheme: str) -> bytes:
    """sf-heu's public-key bytes from checked integers (see :func:`public_key_fields`)."""
    if scheme == "ou":
        n, capital_g, capital_h, max_plain_bits = fields
        body = _array(4) + b"".join(_raw(_mp_bytes(v)) for v in (n, capital_g, capital_h)) + _uint(max_plain_bits)
    else:
        body = _array(2) + b"".join(_raw(_mp_bytes(v)) for v in fields)
    return body + _tail(scheme)
