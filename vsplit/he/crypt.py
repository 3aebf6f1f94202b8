"""Encrypted columns: encrypt packed rows at the label party, decrypt and unpack sums there.

Example:
    >>> import pytest; _ = pytest.importorskip("heu")  # skipped where sf-heu is not installed
    >>> import numpy as np
    >>> from vsplit.he import Packing, decrypt_sums, encrypt_rows, generate_keypair
    >>> keys = generate_keypair(key_bits=1024, insecure_small_key_for_tests=True)
    >>> packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=3, plaintext_bits=keys.public.plaintext_bits)
    >>> column = encrypt_rows(keys.public, np.array([1.0, 0.0, 1.0]), packing=packing)
    >>> decrypt_sums(keys, column, packing=packing, count=3).ravel().tolist()
    [1, 0, 1]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.errors import ConfigError, DataError, ProtocolError
from vsplit.he._lib import heu_modules
from vsplit.he.fixed import Packing
from vsplit.he.keys import KeyPair, PublicKey


@dataclass(frozen=True, eq=False)
class Ciphertexts:
    """A 1-D array of ciphertexts under ``public`` (sf-heu's ``CiphertextArray`` inside)."""

    public: PublicKey
    array: Any

    def __len__(self) -> int:
        return int(self.array.size)

    def __repr__(self) -> str:
        return f"Ciphertexts({len(self)} under {self.public.scheme}-{self.public.key_bits})"


def encrypt_rows(public: PublicKey, values: np.ndarray, *, packing: Packing) -> Ciphertexts:
    """Encrypt one packed plaintext per row of ``values`` (shape ``(rows, packing.slots)``, or ``(rows,)``).

    Raises:
        DataError: no rows, or a value is not finite or out of its bound (see :meth:`Packing.to_integers`).
        ConfigError: the packing was planned for a larger plaintext space than this key has.
    """
    if packing.plaintext_bits > public.plaintext_bits:
        raise ConfigError(f"he packing: planned for {packing.plaintext_bits}-bit plaintexts, the key holds "
                          f"{public.plaintext_bits}; plan with plaintext_bits=public.plaintext_bits")
    phe, _ = heu_modules()
    packed = packing.pack(values)
    if not len(packed):  # sf-heu 0.5.2b0 cannot hold an empty array (loading one crashes the process)
        raise DataError("he: no rows to encrypt")
    plain = public.kit.array(packed, phe.BigintEncoderParams())
    return Ciphertexts(public=public, array=public.kit.encryptor().encrypt(plain))


def decrypt_sums(keys: KeyPair, sums: Ciphertexts, *, packing: Packing, count: int,
                 sums_per_plaintext: int = 1) -> np.ndarray:
    """Decrypt a batch and unpack: exact int64 array of shape ``(count, packing.slots)``.

    ``sums_per_plaintext`` is 1 for sums as they come from :func:`vsplit.he.group_sums`, and
    ``packing.sums_per_plaintext`` after :func:`vsplit.he.pack_sums`.

    Raises:
        ProtocolError: the ciphertexts are under another key, or fewer than ``count`` sums arrived.
    """
    if sums.public.fingerprint != keys.public.fingerprint:
        raise ProtocolError("he: ciphertexts under another public key; both parties must use this run's key")
    if len(sums) * sums_per_plaintext < count:
        raise ProtocolError(f"he: {len(sums)} ciphertexts cannot hold {count} sums", local=True)
    plain = keys.kit.decryptor().decrypt(sums.array).to_numpy()
    return packing.unpack(plain, count=count, sums_per_plaintext=sums_per_plaintext)
