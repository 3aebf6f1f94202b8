"""Snapshot signatures: a partner signs its cached-mode snapshots with its TLS key (ECDSA P-256, SHA-256); the bank
checks them against the partner's pinned certificate. A stored snapshot thus proves which partner made it.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from vsplit.transport.identity import create_identity, write_identity
    >>> files = write_identity(create_identity("shop"), Path(tempfile.mkdtemp()))
    >>> signature = sign(files.key_path, b"digest")
    >>> verify(files.cert_path, b"digest", signature), verify(files.cert_path, b"other", signature)
    (True, False)
"""

from __future__ import annotations

import functools
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


@functools.lru_cache(maxsize=8)
def _key(path: str) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{path}: not an EC private key")
    return key


@functools.lru_cache(maxsize=32)
def _public(path: str) -> ec.EllipticCurvePublicKey:
    key = x509.load_pem_x509_certificate(Path(path).read_bytes()).public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise TypeError(f"{path}: not an EC certificate")
    return key


def sign(key_path: str | Path, digest: bytes) -> bytes:
    """The DER ECDSA signature of ``digest`` with the private key at ``key_path``."""
    return _key(str(key_path)).sign(digest, ec.ECDSA(hashes.SHA256()))


def verify(cert_path: str | Path, digest: bytes, signature: bytes) -> bool:
    """Whether ``signature`` over ``digest`` was made with the key of the certificate at ``cert_path``."""
    try:
        _public(str(cert_path)).verify(signature, digest, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True
