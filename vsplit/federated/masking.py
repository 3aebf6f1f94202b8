"""Pairwise masks for secure aggregation: X25519 agreement, HKDF bound to the run, a ChaCha20 keystream as PRG.

Theory of operation. Clients ``i`` and ``j`` each hold an X25519 key pair; from the other's public key each
computes the same shared secret, and HKDF-SHA256 turns it into a 32-byte seed ``s_ij`` whose ``info`` binds the
run id, the round, the attempt (a redo after a dropout derives new seeds, so a mask is never used twice), the pair's
indices and both public keys. ChaCha20 keyed with ``s_ij`` (zero nonce: every key is used once) stretches the seed
into ``d`` uniform 64-bit words ``PRG(s_ij)``. Client ``i`` adds ``PRG(s_ij)`` for every other member ``j > i`` and
subtracts it for every ``j < i``, modulo ``2^k``, so over all members the masks cancel exactly and the server's sum
of masked vectors is the sum of the unmasked ones.

API:
    ``new_private_key(seed=None) -> bytes``, ``public_key(private) -> bytes``,
    ``pair_seed(private, peer_public, *, own_index, peer_index, own_public, context) -> bytes``,
    ``prg(seed, length) -> uint64 array``, ``mask_for(index, private, publics, *, context, length, modulus_mask)``.

Example:
    >>> a, b = new_private_key(seed=b"a" * 32), new_private_key(seed=b"b" * 32)
    >>> ctx = MaskContext(run_id="run-1", round=0, attempt=0)
    >>> s_ab = pair_seed(a, public_key(b), own_index=0, peer_index=1, own_public=public_key(a), context=ctx)
    >>> s_ab == pair_seed(b, public_key(a), own_index=1, peer_index=0, own_public=public_key(b), context=ctx)
    True
    >>> len(prg(s_ab, 5)), prg(s_ab, 5).dtype.name
    (5, 'uint64')
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from vsplit.errors import ConfigError

KEY_BYTES = 32
_LABEL = b"vsplit secure aggregation v1 pairwise mask"
_RAW = {"encoding": serialization.Encoding.Raw, "format": serialization.PublicFormat.Raw}


@dataclass(frozen=True)
class MaskContext:
    """What a mask is bound to: the run, the round, and the attempt within the round (0, then 1 per redo)."""

    run_id: str
    round: int
    attempt: int

    def info(self, low: int, high: int, public_low: bytes, public_high: bytes) -> bytes:
        """HKDF ``info`` for the pair ``low < high``: label, run id (length-prefixed), counters, both keys."""
        run = self.run_id.encode()
        return b"".join([
            _LABEL, struct.pack("<I", len(run)), run,
            struct.pack("<QIII", self.round, self.attempt, low, high), public_low, public_high,
        ])


def new_private_key(seed: bytes | None = None) -> bytes:
    """A fresh X25519 private key (32 raw bytes); ``seed`` (32 bytes) makes it deterministic, for tests only."""
    if seed is None:
        key = X25519PrivateKey.generate()
    else:
        if len(seed) != KEY_BYTES:
            raise ConfigError(f"secure aggregation: a key seed must be {KEY_BYTES} bytes, got {len(seed)}")
        key = X25519PrivateKey.from_private_bytes(seed)
    return key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def public_key(private: bytes) -> bytes:
    """The 32-byte X25519 public key of ``private``."""
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(**_RAW)


def pair_seed(
    private: bytes, peer_public: bytes, *, own_index: int, peer_index: int, own_public: bytes, context: MaskContext
) -> bytes:
    """The 32-byte seed ``s_ij`` both members of a pair derive (the same at both ends)."""
    if own_index == peer_index:
        raise ConfigError("secure aggregation: a client has no mask with itself")
    shared = X25519PrivateKey.from_private_bytes(private).exchange(X25519PublicKey.from_public_bytes(peer_public))
    if own_index < peer_index:
        info = context.info(own_index, peer_index, own_public, peer_public)
    else:
        info = context.info(peer_index, own_index, peer_public, own_public)
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(shared)


def prg(seed: bytes, length: int) -> np.ndarray:
    """``length`` pseudo-random 64-bit words from a 32-byte seed: the ChaCha20 keystream, little-endian."""
    stream = Cipher(algorithms.ChaCha20(seed, b"\x00" * 16), mode=None).encryptor()
    return np.frombuffer(stream.update(bytes(8 * length)), dtype="<u8").astype(np.uint64)


def mask_for(
    index: int,
    private: bytes,
    publics: Mapping[int, bytes],
    *,
    context: MaskContext,
    length: int,
    modulus_mask: np.uint64,
) -> np.ndarray:
    """Client ``index``'s total mask: ``sum_{j > i} PRG(s_ij) - sum_{j < i} PRG(s_ij)`` modulo ``2^k``.

    ``publics`` maps every member's index (``index`` included) to its public key.
    """
    own_public = publics[index]
    total = np.zeros(length, dtype=np.uint64)
    for peer, peer_public in publics.items():
        if peer == index:
            continue
        stream = prg(pair_seed(private, peer_public, own_index=index, peer_index=peer, own_public=own_public,
                               context=context), length)
        if peer > index:
            total += stream
        else:
            total -= stream
    return total & modulus_mask
