"""Party identities: a private key, a self-signed certificate, and its fingerprint.

Theory of operation. vsplit needs no certificate authority. Each party creates one P-256 key and a self-signed
X.509 certificate whose common name is its party name (``vsplit keys new --party bank``), sends the certificate
file to its partners, and reads the SHA-256 fingerprint to them over a second channel (phone, signed e-mail).
Every party then *pins* its partners: a connection is accepted only from the exact certificate configured for
that party name (see :mod:`vsplit.transport.tls`). The fingerprint is the one ``openssl x509 -noout -fingerprint
-sha256 -in bank.pem`` prints, so partners can check it with standard tools.

The private key is written atomically (temporary file, then rename) and is created owner-only (mode 0600) by
``os.open``, never widened and narrowed afterwards; it is stored unencrypted, so protect the folder like any
other server key.

Example:
    >>> ident = create_identity("bank", days=30)
    >>> cert = ident.certificate
    >>> party_of(cert)
    'bank'
    >>> len(fingerprint(cert)) == 32 * 3 - 1
    True
    >>> check_validity(cert, whose="partner 'bank'")
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vsplit.atomic import refuse_shared
from vsplit.errors import AuthenticationError, ConfigError

#: Certificate lifetime when none is given: two years.
DEFAULT_DAYS = 730
#: A certificate starts to be valid this long before it was made, to tolerate clocks that differ a little.
CLOCK_SKEW = dt.timedelta(minutes=5)
_PARTY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Identity:
    """A party's key and certificate, in memory."""

    party: str
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def fingerprint(self) -> str:
        """The certificate's SHA-256 fingerprint (see :func:`fingerprint`)."""
        return fingerprint(self.certificate)


@dataclass(frozen=True)
class IdentityFiles:
    """Where :func:`write_identity` put a party's files."""

    party: str
    key_path: Path
    cert_path: Path
    fingerprint: str
    not_after: dt.datetime


def check_party_name(party: str) -> str:
    """Return ``party`` if it is a valid party name (letters, digits, ``.``, ``_``, ``-``; at most 64).

    >>> check_party_name("bank")
    'bank'
    >>> check_party_name("../etc")
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: party name '../etc' is not allowed; use letters, digits, '.', '_' and '-' (at most 64)
    """
    if not isinstance(party, str) or not _PARTY.fullmatch(party):
        raise ConfigError(
            f"party name {party!r} is not allowed; use letters, digits, '.', '_' and '-' (at most 64)"
        )
    return party


def create_identity(party: str, *, days: float = DEFAULT_DAYS, not_before: dt.datetime | None = None) -> Identity:
    """Make a new P-256 key and a self-signed certificate for ``party``, valid for ``days`` days.

    The certificate's common name is the party name; it may be used as a TLS server and client certificate
    and cannot sign other certificates (``CA:FALSE``). ``not_before`` defaults to now minus :data:`CLOCK_SKEW`.
    """
    check_party_name(party)
    if not days > 0:
        raise ConfigError(f"certificate lifetime must be positive, got {days} days")
    key = ec.generate_private_key(ec.SECP256R1())
    origin = not_before if not_before is not None else _now()
    start = origin if not_before is not None else origin - CLOCK_SKEW
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party)])
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(origin + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Identity(party=party, key=key, certificate=cert)


def write_identity(identity: Identity, out_dir: str | Path, *, force: bool = False) -> IdentityFiles:
    """Write ``<party>.key`` (mode 0600) and ``<party>.pem`` into ``out_dir``; refuse to overwrite unless ``force``.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> files = write_identity(create_identity("bank"), out)
    >>> oct(files.key_path.stat().st_mode & 0o777), files.cert_path.name
    ('0o600', 'bank.pem')
    >>> write_identity(create_identity("bank"), out)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: ... already exists; pass --force to replace it (partners must then pin the new ...)
    """
    out = Path(out_dir)
    key_path, cert_path = out / f"{identity.party}.key", out / f"{identity.party}.pem"
    if not force:
        for path in (key_path, cert_path):
            if path.exists():
                raise ConfigError(
                    f"{path} already exists; pass --force to replace it (partners must then pin the new certificate)"
                )
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_pem = identity.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_atomically(key_path, key_pem, mode=0o600)
    _write_atomically(cert_path, identity.certificate.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return IdentityFiles(
        party=identity.party,
        key_path=key_path,
        cert_path=cert_path,
        fingerprint=identity.fingerprint,
        not_after=identity.certificate.not_valid_after_utc,
    )


def _write_atomically(path: Path, data: bytes, *, mode: int) -> None:
    """Write ``data`` to a fresh temporary file created with ``mode``, then rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, mode)  # the mode applies at creation: the file is never wider than ``mode``
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_certificate(path: str | Path, *, whose: str = "certificate") -> x509.Certificate:
    """Read a PEM (or DER) certificate; a :class:`ConfigError` naming the fix if it is missing or unreadable."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{whose} not found at {path}; create it with `vsplit keys new --party NAME --out DIR` "
            "(or ask the partner for its certificate file)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{whose} at {path} cannot be read: {exc.strerror}") from None
    try:
        if b"-----BEGIN CERTIFICATE-----" in data:
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    except ValueError:
        raise ConfigError(f"{whose} at {path} is not an X.509 certificate (expected a PEM file)") from None


def check_key_file(path: str | Path) -> Path:
    """Check that the private key at ``path`` exists and, on POSIX, that only its owner can read it."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(f"private key not found at {path}; create it with `vsplit keys new --party NAME`") from None
    refuse_shared(path, mode, what="private key")
    return path


def fingerprint(cert: x509.Certificate | bytes) -> str:
    """SHA-256 of the certificate's DER encoding, as upper-case hex pairs joined by colons.

    ``cert`` may be a certificate object or its DER bytes.

    >>> fingerprint(b"not really a certificate")[:11]
    'D6:18:22:55'
    """
    der = cert if isinstance(cert, bytes) else cert.public_bytes(serialization.Encoding.DER)
    digest = hashes.Hash(hashes.SHA256())
    digest.update(der)
    return ":".join(f"{b:02X}" for b in digest.finalize())


def party_of(cert: x509.Certificate) -> str | None:
    """The certificate's common name (the party name vsplit put there), or ``None`` if it has none."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = names[0].value if len(names) == 1 else None
    return value if isinstance(value, str) else None


def check_validity(cert: x509.Certificate, *, whose: str, now: dt.datetime | None = None) -> None:
    """Raise :class:`AuthenticationError` if ``cert`` has expired or is not valid yet.

    ``whose`` names the certificate in the message, e.g. ``"partner 'bank'"``.
    """
    now = now if now is not None else _now()
    party = party_of(cert) or "NAME"
    if now > cert.not_valid_after_utc:
        raise AuthenticationError(
            f"{whose} certificate expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC; its owner must run "
            f"`vsplit keys new --party {party} --force` and send the new certificate and fingerprint to its partners"
        )
    if now < cert.not_valid_before_utc:
        raise AuthenticationError(
            f"{whose} certificate is valid only from {cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC; "
            "check both machines' clocks"
        )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


__all__ = [
    "DEFAULT_DAYS",
    "Identity",
    "IdentityFiles",
    "check_key_file",
    "check_party_name",
    "check_validity",
    "create_identity",
    "fingerprint",
    "load_certificate",
    "party_of",
    "write_identity",
]
