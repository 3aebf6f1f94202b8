"""The ciphertext-array message: a declared count and width, checked before a byte is decoded; never pickle.

Layout (big-endian): ``b"VHC1"``, the key's 8-byte fingerprint, scheme code (u8), count (u32), width in bytes
(u16), then ``count`` ciphertexts as unsigned integers of ``width`` bytes. The reader checks, in this order: the
size cap, the header, that scheme, key and width are this run's, the count (at least 1: sf-heu 0.5.2b0 crashes the
process loading an empty array) against what the protocol expects, that the length is exactly
``header + count * width``, then (vectorized) that every ciphertext is in ``1..modulus-1``; only then does it
rebuild sf-heu's bytes itself (:mod:`vsplit.he.heu_bytes`): sf-heu never parses a peer's bytes.
Anything else is a :class:`~vsplit.errors.ProtocolError` naming the field.

Example:
    >>> import pytest; _ = pytest.importorskip("heu")  # skipped where sf-heu is not installed
    >>> import numpy as np
    >>> from vsplit.he import Packing, decode_ciphertexts, encode_ciphertexts, encrypt_rows, generate_keypair
    >>> keys = generate_keypair(key_bits=1024, insecure_small_key_for_tests=True)
    >>> packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=2, plaintext_bits=keys.public.plaintext_bits)
    >>> frame = encode_ciphertexts(encrypt_rows(keys.public, np.array([1.0, 0.0]), packing=packing))
    >>> len(decode_ciphertexts(frame, public=keys.public, expected_count=2))
    2
"""

from __future__ import annotations

import struct

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.he import heu_bytes
from vsplit.he._lib import heu_modules
from vsplit.he.crypt import Ciphertexts
from vsplit.he.keys import PublicKey

_MAGIC = b"VHC1"
_HEADER = struct.Struct(">4s8sBIH")
#: the default cap of one message: 64 MiB (about 250,000 OU-2048 ciphertexts)
MAX_MESSAGE_BYTES = 64 << 20


def encode_ciphertexts(ciphertexts: Ciphertexts) -> bytes:
    """The message of a 1-D ciphertext array (one loop over the ciphertexts to read sf-heu's bytes)."""
    public = ciphertexts.public
    matrix = heu_bytes.ciphertexts_to_matrix(ciphertexts.array.serialize(), width=public.width)
    head = _HEADER.pack(_MAGIC, public.fingerprint, heu_bytes.SCHEMA_CODE[public.scheme], len(matrix), public.width)
    return head + matrix.tobytes()


def decode_ciphertexts(data: bytes, *, public: PublicKey, expected_count: int | None = None,
                       max_bytes: int = MAX_MESSAGE_BYTES) -> Ciphertexts:
    """Read a ciphertext-array message under ``public``, refusing anything but exactly what is expected.

    Raises:
        ProtocolError: oversize, truncated, another key or scheme, a count other than ``expected_count``, or a
            ciphertext out of range; the message names which.
    """
    if len(data) > max_bytes:
        raise ProtocolError(f"ciphertext message: {len(data)} bytes, over the {max_bytes}-byte cap")
    if len(data) < _HEADER.size:
        raise ProtocolError(f"ciphertext message: {len(data)} bytes, shorter than its {_HEADER.size}-byte header")
    magic, fingerprint, code, count, width = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise ProtocolError("ciphertext message: wrong magic")
    if code != heu_bytes.SCHEMA_CODE[public.scheme] or fingerprint != public.fingerprint:
        raise ProtocolError("ciphertext message: under another key or scheme than this run's")
    if width != public.width:
        raise ProtocolError(f"ciphertext message: {width}-byte ciphertexts, this key's are {public.width}")
    if count == 0:  # sf-heu 0.5.2b0 crashes the process (SIGSEGV) loading an empty array
        raise ProtocolError("ciphertext message: 0 ciphertexts; a message carries at least one")
    if expected_count is not None and count != expected_count:
        raise ProtocolError(f"ciphertext message: {count} ciphertexts, the protocol expects {expected_count}")
    if len(data) != _HEADER.size + count * width:
        raise ProtocolError(f"ciphertext message: {len(data)} bytes, its header declares "
                            f"{_HEADER.size + count * width}")
    matrix = np.frombuffer(data, dtype=np.uint8, offset=_HEADER.size).reshape(count, width)
    modulus = np.frombuffer(public.modulus.to_bytes(width, "big"), dtype=np.uint8)
    differs = matrix != modulus
    first = differs.argmax(axis=1)
    below = differs.any(axis=1) & (matrix[np.arange(count), first] < modulus[first])
    if not (below & matrix.any(axis=1)).all():
        raise ProtocolError("ciphertext message: a ciphertext is 0 or not below the key's modulus")
    _, hnp = heu_modules()
    try:
        array = hnp.CiphertextArray.load_from(heu_bytes.matrix_to_ciphertexts(matrix, scheme=public.scheme))
    except Exception as exc:  # pragma: no cover - the bytes above are ours; kept so nothing escapes as a crash
        raise ProtocolError(f"ciphertext message: sf-heu refused it ({type(exc).__name__})") from None
    if int(array.size) != count:  # pragma: no cover - likewise
        raise ProtocolError(f"ciphertext message: {array.size} ciphertexts decoded, {count} declared")
    return Ciphertexts(public=public, array=array)
