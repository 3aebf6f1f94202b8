"""Key pairs at the label party, public keys at a partner.

The label party makes one key pair per run (:func:`generate_keypair`: Okamoto-Uchiyama by default, Paillier on
request, 2048 bits at least) and sends :meth:`PublicKey.to_bytes`; the secret key never leaves its process and has
no serialised form here. A partner reads the key with :meth:`PublicKey.from_bytes`, naming the schemes and sizes it
accepts, and refuses anything else before sf-heu sees a byte (see :mod:`vsplit.he.heu_bytes` for why).

Key message (big-endian): ``b"VHK1"``, scheme code (u8: 1 OU, 4 Paillier), key bits (u16), field width in bytes
(u16), OU's plaintext bits (u16, 0 for Paillier), field count (u8), then the fields at that width: ``n, G, H`` (OU)
or ``n, h_s`` (Paillier).

Example:
    >>> import pytest; _ = pytest.importorskip("heu")  # skipped where sf-heu is not installed
    >>> from vsplit.he import generate_keypair, PublicKey
    >>> keys = generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)
    >>> message = keys.public.to_bytes()  # what the label party sends
    >>> partner = PublicKey.from_bytes(message, schemes=("ou",), min_key_bits=1024, insecure_small_key_for_tests=True)
    >>> partner.fingerprint == keys.public.fingerprint
    True
"""

from __future__ import annotations

import hashlib
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any

from vsplit.errors import ConfigError, ProtocolError
from vsplit.he import heu_bytes
from vsplit.he._lib import heu_modules

#: the schemes a run can use, by config name
SCHEMES = ("ou", "paillier")
#: the smallest key a run accepts (NIST: 112-bit security)
MIN_KEY_BITS = 2048
#: the smallest key the test-only flag allows (sf-heu's OU needs ~960 bits)
_TEST_MIN_KEY_BITS = {"ou": 1024, "paillier": 512}
_MAX_KEY_BITS = 8192
_MAGIC = b"VHK1"
_HEADER = struct.Struct(">4sBHHHB")
_CODES = {code: name for name, code in heu_bytes.SCHEMA_CODE.items()}


def _schema(scheme: str) -> Any:
    phe, _ = heu_modules()
    return {"ou": phe.SchemaType.OU, "paillier": phe.SchemaType.ZPaillier}[scheme]


@dataclass(frozen=True, eq=False)
class PublicKey:
    """A public key either side can encrypt and add with; built by :func:`generate_keypair` or :meth:`from_bytes`.

    ``fields``: sf-heu's integers (OU: ``n, G, H, max_plain_bits``; Paillier: ``n, h_s``). ``plaintext_bits``:
    every plaintext, sums included, must stay within ``(-2**plaintext_bits, 2**plaintext_bits)``.
    """

    scheme: str
    key_bits: int
    fields: tuple[int, ...]
    plaintext_bits: int
    kit: Any = field(repr=False)

    @property
    def modulus(self) -> int:
        """The ciphertext modulus: ``n`` (OU) or ``n**2`` (Paillier)."""
        return self.fields[0] if self.scheme == "ou" else self.fields[0] ** 2

    @property
    def width(self) -> int:
        """Bytes of one ciphertext (and of one key field) on the wire."""
        return (self.modulus.bit_length() + 7) // 8

    def to_bytes(self) -> bytes:
        """The key message a partner reads with :meth:`from_bytes`."""
        values, extra = (self.fields[:3], self.fields[3]) if self.scheme == "ou" else (self.fields, 0)
        head = _HEADER.pack(_MAGIC, heu_bytes.SCHEMA_CODE[self.scheme], self.key_bits, self.width, extra, len(values))
        return head + b"".join(value.to_bytes(self.width, "big") for value in values)

    @property
    def fingerprint(self) -> bytes:
        """8 bytes naming this key; every ciphertext message carries it, so a mixed-up key fails loudly."""
        return hashlib.sha256(self.to_bytes()).digest()[:8]

    @classmethod
    def from_bytes(cls, data: bytes, *, schemes: tuple[str, ...] = ("ou",), min_key_bits: int = MIN_KEY_BITS,
                   max_key_bits: int = 4096, insecure_small_key_for_tests: bool = False) -> PublicKey:
        """Read a label party's key message, accepting only ``schemes`` with ``min_key_bits..max_key_bits`` bits.

        Every field is checked (sizes, ranges, OU's plaintext bits, which size a table sf-heu precomputes) before the
        key is rebuilt for sf-heu.

        Raises:
            ProtocolError: the bytes are not a key message, or name a scheme or size this party does not accept.
            ConfigError: ``min_key_bits`` is below 2048 without the test-only flag.
        """
        _check_size(min_key_bits, insecure=insecure_small_key_for_tests, scheme=None)
        if len(data) < _HEADER.size:
            raise ProtocolError(f"public key message: {len(data)} bytes, shorter than its {_HEADER.size}-byte header")
        magic, code, key_bits, width, extra, count = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ProtocolError("public key message: wrong magic; the label party runs another vsplit version?")
        scheme = _CODES.get(code)
        if scheme is None or scheme not in schemes:
            raise ProtocolError(f"public key message: scheme {scheme or code!r} is not one this party accepts "
                                f"({', '.join(schemes)}); set the same he scheme at both parties")
        if not min_key_bits <= key_bits <= max_key_bits:
            raise ProtocolError(f"public key message: a {key_bits}-bit {scheme} key; this party accepts "
                                f"{min_key_bits}..{max_key_bits} bits; raise the label party's key_bits")
        expected_width = ((2 if scheme == "paillier" else 1) * (key_bits + 8) + 7) // 8
        if count != (3 if scheme == "ou" else 2) or not 0 < width <= expected_width:
            raise ProtocolError(f"public key message: {count} fields of {width} bytes do not fit a {scheme} key")
        if len(data) != _HEADER.size + count * width:
            raise ProtocolError(f"public key message: {len(data)} bytes, its header declares "
                                f"{_HEADER.size + count * width}")
        values = [int.from_bytes(data[_HEADER.size + i * width : _HEADER.size + (i + 1) * width], "big")
                  for i in range(count)]
        n = values[0]
        if n % 2 == 0 or not key_bits - 1 <= n.bit_length() <= key_bits + 8:
            raise ProtocolError(f"public key message: the modulus is not an odd {key_bits}-bit number")
        bound = n if scheme == "ou" else n * n
        if not all(1 < v < bound for v in values[1:]) or (bound.bit_length() + 7) // 8 != width:
            raise ProtocolError("public key message: a field is out of range for its modulus")
        if scheme == "ou" and not 64 <= extra <= (key_bits + 2) // 3 + 1:
            raise ProtocolError(f"public key message: {extra} plaintext bits for a {key_bits}-bit OU key")
        fields = [*values, extra] if scheme == "ou" else values
        phe, hnp = heu_modules()
        try:
            kit = hnp.setup(phe.PublicKey.load_from(heu_bytes.public_key_bytes(fields, scheme=scheme)))
        except Exception as exc:  # sf-heu's own checks (e.g. G not invertible mod n)
            raise ProtocolError(f"public key message: sf-heu refused the key ({type(exc).__name__})") from None
        return cls(scheme=scheme, key_bits=key_bits, fields=tuple(fields), kit=kit,
                   plaintext_bits=_plaintext_bits(kit.public_key()))


@dataclass(frozen=True, eq=False)
class KeyPair:
    """The label party's keys: ``public`` to share, the secret kept inside sf-heu's kit (never serialised)."""

    public: PublicKey
    kit: Any = field(repr=False)

    def __repr__(self) -> str:
        return f"KeyPair({self.public.scheme}, {self.public.key_bits} bits)"


def _plaintext_bits(heu_public_key: Any) -> int:
    # sf-heu accepts |m| < bound (OU: bound = 2**k); keep one bit of margin below it
    return int(heu_public_key.plaintext_bound()).bit_length() - 2


def _check_size(key_bits: int, *, insecure: bool, scheme: str | None) -> None:
    if key_bits >= MIN_KEY_BITS:
        return
    if not insecure:
        raise ConfigError(f"he.key_bits = {key_bits}: keys under {MIN_KEY_BITS} bits are refused; use 2048 or more")
    floor = _TEST_MIN_KEY_BITS.get(scheme or "paillier", 512)
    if key_bits < floor:
        raise ConfigError(f"he.key_bits = {key_bits}: even the test-only flag needs {floor} bits or more")
    warnings.warn(f"a {key_bits}-bit homomorphic key: tests only, never a real run", stacklevel=3)


def generate_keypair(*, scheme: str = "ou", key_bits: int = MIN_KEY_BITS,
                     insecure_small_key_for_tests: bool = False) -> KeyPair:
    """Make the label party's key pair for one run (a prime search: 0.5-4 s for OU-2048, ~1 s for Paillier-2048).

    Args:
        scheme: ``"ou"`` (Okamoto-Uchiyama: about 18x faster encryption and decryption, benchmarks/he.py) or
            ``"paillier"``.
        key_bits: at least 2048.
        insecure_small_key_for_tests: allow 1024-bit OU / 512-bit Paillier keys, with a warning; tests only.

    Raises:
        ConfigError: unknown scheme, or a key too small; also when sf-heu is not installed.
    """
    if scheme not in SCHEMES:
        raise ConfigError(f"he.scheme = {scheme!r}: unknown; use one of {', '.join(SCHEMES)}")
    _check_size(key_bits, insecure=insecure_small_key_for_tests, scheme=scheme)
    if key_bits > _MAX_KEY_BITS:
        raise ConfigError(f"he.key_bits = {key_bits}: more than {_MAX_KEY_BITS} bits; 2048 or 3072 are usual")
    _, hnp = heu_modules()
    kit = hnp.setup(_schema(scheme), key_bits)
    fields = heu_bytes.public_key_fields(kit.public_key().serialize(), scheme=scheme)
    public = PublicKey(scheme=scheme, key_bits=key_bits, fields=tuple(fields),
                       kit=kit, plaintext_bits=_plaintext_bits(kit.public_key()))
    return KeyPair(public=public, kit=kit)
