"""One homomorphic layer for vertical trees, WOE/IV binning and scorecards (sf-heu: Okamoto-Uchiyama, Paillier).

Theory of operation: the label party makes a key pair per run (:func:`generate_keypair`) and sends the public key
(:meth:`PublicKey.to_bytes`); it encrypts one packed plaintext a row (:class:`Packing`, :func:`encrypt_rows`: labels
as 0/1, or a gradient and a hessian side by side) and sends them (:func:`encode_ciphertexts`). A partner checks the
key against the schemes and sizes it accepts (:meth:`PublicKey.from_bytes`), reads the ciphertexts
(:func:`decode_ciphertexts`), adds them by groups only it knows (:func:`group_sums`: bins of its columns, a node's
rows; :func:`subtract`: a sibling is parent - node), packs several sums into one ciphertext (:func:`pack_sums`) and
sends them back; the label party decrypts and unpacks exact integer sums (:func:`decrypt_sums`). A partner sees
ciphertexts only; the label party sees per-group sums, never a partner's value or bin edge.

Everything here is sans-IO. ``import vsplit.he`` does not import sf-heu; using the layer without it raises a
:class:`~vsplit.errors.ConfigError` naming `pip install 'vsplit[he]'`.

Example:
    >>> from vsplit.he import Packing
    >>> Packing.plan(scale=2**16, bounds=(1.0, 0.25), max_rows=40_000, plaintext_bits=681).sums_per_plaintext
    10
"""

from __future__ import annotations

from vsplit.he.crypt import Ciphertexts, decrypt_sums, encrypt_rows
from vsplit.he.fixed import Packing
from vsplit.he.keys import MIN_KEY_BITS, SCHEMES, KeyPair, PublicKey, generate_keypair
from vsplit.he.sums import group_sums, pack_sums, subtract
from vsplit.he.wire import MAX_MESSAGE_BYTES, decode_ciphertexts, encode_ciphertexts

__all__ = [
    "MAX_MESSAGE_BYTES",
    "MIN_KEY_BITS",
    "SCHEMES",
    "Ciphertexts",
    "KeyPair",
    "Packing",
    "PublicKey",
    "decode_ciphertexts",
    "decrypt_sums",
    "encode_ciphertexts",
    "encrypt_rows",
    "generate_keypair",
    "group_sums",
    "pack_sums",
    "subtract",
]
