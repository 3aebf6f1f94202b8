"""Curve operations of ECDH-PSI on X25519: hash IDs to u-coordinates, blind them with a secret scalar.

Theory of operation. Each party maps an ID ``x`` to ``H(x)``, a u-coordinate, blinds it with its fresh secret
scalar ``a`` to ``X25519(a, H(x))``, and blinds the peer's values once more. Because scalar multiplication commutes,
``X25519(a, X25519(b, H(x))) == X25519(b, X25519(a, H(x)))``: equal double-blinded values mark shared IDs. Why this
construction is sound:

* **Hashing to a u-coordinate.** ``H(x) = SHA-512(dst || x)[:32]`` with bit 255 cleared, where ``dst`` is the
  length-prefixed protocol label and the 32-byte session salt (so the encoding is injective and values from
  different sessions or protocols never meet). RFC 7748 X25519 takes *any* 255-bit string as a u-coordinate: values
  of ``p = 2^255 - 19`` or more are reduced mod p, and every u is the x-coordinate of a point on Curve25519 or on its
  quadratic twist. So a plain hash gives a uniform u without Elligator; ``X25519(k, H(x))`` is a keyed function of
  ``x`` that is pseudorandom in the random-oracle model whenever Diffie-Hellman is hard in both groups.
* **Twist security.** The curve has order ``8·l`` and the twist ``4·l'`` with primes ``l ≈ 2^252`` and
  ``l' ≈ 2^253``. Curve25519 was chosen to be twist-secure: Diffie-Hellman on a twist point is as hard as on the
  curve (about 2^125 work), so the half of the IDs that hash onto the twist are as well protected as the rest.
* **Clamped scalars.** X25519 clears the scalar's low three bits and sets bit 254. The scalar is thus a multiple of
  both cofactors (8 and 4), so every output lies in the prime-order subgroup: a peer learns nothing about the
  scalar by sending points with a small-order component. It is ``8·m`` with ``m < 2^252``, below both ``l`` and
  ``l'``, so it never maps a point of large order to zero. Clamping acts on scalars, not points, so blinding still
  commutes; the x-only ladder identifies ``P`` and ``-P``, which is harmless because H yields a u, not a point.
* **The all-zero output.** X25519 returns zero exactly for inputs of small order (:data:`LOW_ORDER`: 0, 1, p-1,
  their non-canonical forms p and p+1, and the two points of order 8), and ``cryptography`` refuses to return it.
  :func:`hash_to_u` never yields such a u (a hit, probability below 2^-250, moves to the next counter value), and a
  value honestly blinded by the peer never has small order, so a zero output means the peer sent a crafted point:
  :func:`blind` raises :class:`LowOrderPoint` and the protocol aborts.
* **What a party learns.** Semi-honest parties, DDH in both groups, H a random oracle: a party sees the peer's
  blinded values, which are indistinguishable from random, so it learns the peer's set size and, where the protocol
  tells it, which of its *own* IDs are shared - nothing about the peer's other IDs. Fresh scalars and a fresh salt
  per session make values from different sessions unlinkable. (A malicious party can still choose its input set, as
  in any PSI; it cannot learn more than the intersection with the set it chose.)

Example:
    >>> a, b = bytes(range(32)), bytes(range(1, 33))
    >>> u = hash_to_u([b"C-001"], salt=bytes(32), label=b"vsplit-psi-v1")
    >>> once = blind(blind(u, scalar=a), scalar=b)
    >>> bool((once == blind(blind(u, scalar=b), scalar=a)).all())
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

#: Bytes in a scalar, a u-coordinate and a blinded value.
POINT_BYTES = 32
_P = 2**255 - 19
#: u-coordinates (little-endian, bit 255 clear) of the points of small order on the curve and its twist.
LOW_ORDER: tuple[bytes, ...] = (
    (0).to_bytes(32, "little"),
    (1).to_bytes(32, "little"),
    (_P - 1).to_bytes(32, "little"),
    _P.to_bytes(32, "little"),
    (_P + 1).to_bytes(32, "little"),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
)
_LOW_ORDER_PREFIXES = np.frombuffer(b"".join(v[:8] for v in LOW_ORDER), dtype="<u8")


class LowOrderPoint(ValueError):
    """A u-coordinate of small order was blinded: only a crafted (malicious) input does that."""


def new_scalar() -> bytes:
    """A fresh random 32-byte X25519 scalar from the operating system's CSPRNG (clamped on use).

    >>> len(new_scalar())
    32
    """
    return X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def x25519(scalar: bytes, u: bytes) -> bytes:
    """RFC 7748 X25519 of one 32-byte scalar and one 32-byte u-coordinate.

    Raises:
        LowOrderPoint: ``u`` has small order, so the result would be all zero.

    RFC 7748, section 5.2, first test vector:

    >>> k = bytes.fromhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4")
    >>> u = bytes.fromhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")
    >>> x25519(k, u).hex()
    'c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552'
    """
    try:
        return X25519PrivateKey.from_private_bytes(scalar).exchange(X25519PublicKey.from_public_bytes(u))
    except ValueError:
        raise LowOrderPoint("X25519 of a small-order u-coordinate") from None


def hash_to_u(ids: Sequence[bytes], *, salt: bytes, label: bytes) -> np.ndarray:
    """Hash encoded IDs to X25519 u-coordinates, domain-separated by ``label`` and the session ``salt``.

    ``u = SHA-512(len(label) || label || salt || counter || id)[:32]`` with bit 255 cleared; ``counter`` is a zero
    byte, raised only in the (never observed) case that u has small order.

    Args:
        ids: UTF-8 encoded, normalised IDs.
        salt: the 32-byte session salt agreed in the handshake.
        label: the protocol label, at most 255 bytes.

    Returns:
        An ``(n, 32)`` uint8 array, one u-coordinate per ID.

    >>> hash_to_u([b"a", b"b"], salt=bytes(32), label=b"test").shape
    (2, 32)
    """
    base = _prefix_hash(salt=salt, label=label, counter=0)
    copy = base.copy
    digests = []
    append = digests.append
    for value in ids:
        h = copy()
        h.update(value)
        append(h.digest()[:32])
    out = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, POINT_BYTES).copy()
    out[:, 31] &= 0x7F
    if _has_low_order(out):
        _rehash_low_order(out, ids, salt=salt, label=label)
    return out


def blind(points: np.ndarray, *, scalar: bytes) -> np.ndarray:
    """Multiply each u-coordinate in ``points`` ((n, 32) uint8) by ``scalar``; returns a new (n, 32) array.

    Raises:
        LowOrderPoint: some input has small order (the peer crafted it).

    >>> blind(np.zeros((0, 32), np.uint8), scalar=bytes(32)).shape
    (0, 32)
    """
    data = np.ascontiguousarray(points, dtype=np.uint8).tobytes()
    return np.frombuffer(blind_bytes(data, scalar), dtype=np.uint8).reshape(-1, POINT_BYTES).copy()


def blind_bytes(data: bytes, scalar: bytes) -> bytes:
    """:func:`blind` on concatenated 32-byte u-coordinates; the hot loop, kept free of per-point overhead."""
    key = X25519PrivateKey.from_private_bytes(scalar)
    exchange = key.exchange
    public = X25519PublicKey.from_public_bytes
    try:
        return b"".join([exchange(public(data[i : i + 32])) for i in range(0, len(data), 32)])
    except ValueError:
        raise LowOrderPoint("a u-coordinate of small order was sent; the peer is not following the protocol") from None


def _prefix_hash(*, salt: bytes, label: bytes, counter: int) -> hashlib._Hash:
    if not 0 < len(label) < 256:
        raise ValueError("the PSI label must be 1..255 bytes")
    if len(salt) != POINT_BYTES:
        raise ValueError("the PSI session salt must be 32 bytes")
    return hashlib.sha512(bytes([len(label)]) + label + salt + bytes([counter]))


def _has_low_order(points: np.ndarray) -> bool:
    prefixes = np.ascontiguousarray(points[:, :8]).view("<u8").ravel()
    return bool(np.isin(prefixes, _LOW_ORDER_PREFIXES).any())


def _rehash_low_order(points: np.ndarray, ids: Sequence[bytes], *, salt: bytes, label: bytes) -> None:
    """Replace, in place, each low-order u by the hash under the next counter value (deterministic)."""
    for row, value in enumerate(ids):
        counter = 0
        while points[row].tobytes() in LOW_ORDER:
            counter += 1
            h = _prefix_hash(salt=salt, label=label, counter=counter)
            h.update(value)
            points[row] = np.frombuffer(h.digest()[:32], dtype=np.uint8)
            points[row, 31] &= 0x7F
