"""Who may connect: this party's credentials and the certificate pinned for each peer.

Theory of operation. vsplit trusts no certificate authority. Each party lists its peers by name with the
certificate file each one sent (and whose fingerprint was checked out of band). :meth:`Credentials.load` reads
and checks everything before any socket opens, so configuration mistakes fail at once with the fix. After a
TLS handshake, :func:`identify_peer` accepts the peer only if its certificate is *exactly* the one pinned for
the party it claims to be (SHA-256 of the DER), names that party, and is valid now. The exact comparison
matters: OpenSSL, given the pinned certificates as trust anchors, would also accept a certificate that one of
them signed, and a partner must not be able to speak as another partner.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from vsplit.errors import AuthenticationError, ConfigError
from vsplit.transport.identity import (
    check_key_file,
    check_party_name,
    check_validity,
    fingerprint,
    load_certificate,
    party_of,
)


@dataclass(frozen=True)
class Credentials:
    """This party's certificate and key, and the pinned certificate of each peer, all checked.

    Build it with :meth:`load`, which refuses anything that could not work: a missing or world-readable key,
    a certificate issued to another party name, an expired certificate, one certificate pinned for two parties.
    """

    party: str
    cert_path: Path
    key_path: Path
    pins: Mapping[str, x509.Certificate] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        party: str,
        *,
        own_cert: str | Path,
        own_key: str | Path,
        peers: Mapping[str, str | Path],
    ) -> Credentials:
        """Read and check this party's files and its peers' pinned certificates (party name -> cert path).

        Example:
            >>> import tempfile
            >>> from vsplit.transport.identity import create_identity, write_identity
            >>> out = Path(tempfile.mkdtemp())
            >>> bank = write_identity(create_identity("bank"), out)
            >>> insurer = write_identity(create_identity("insurer"), out)
            >>> creds = Credentials.load("insurer", own_cert=insurer.cert_path, own_key=insurer.key_path,
            ...                          peers={"bank": bank.cert_path})
            >>> sorted(creds.pins)
            ['bank']
            >>> Credentials.load("insurer", own_cert=insurer.cert_path, own_key=insurer.key_path,
            ...                  peers={"retailer": bank.cert_path})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            vsplit.errors.ConfigError: .../bank.pem is the certificate of 'bank' but is pinned for 'retailer'; ...
        """
        check_party_name(party)
        own = load_certificate(own_cert, whose=f"{party}'s own certificate")
        if party_of(own) != party:
            raise ConfigError(
                f"{own_cert} is the certificate of {party_of(own)!r}, not of {party!r}; pass this party's own "
                f"certificate or create one with `vsplit keys new --party {party}`"
            )
        check_validity(own, whose=f"this party's ({party!r})")
        check_key_file(own_key)
        if not peers:
            raise ConfigError(f"{party}: no peers configured; pin at least one peer certificate")
        pins: dict[str, x509.Certificate] = {}
        seen = {fingerprint(own): f"this party ({party!r})"}
        for name, path in peers.items():
            check_party_name(name)
            if name == party:
                raise ConfigError(f"{party}: the peers include this party itself; list only the other parties")
            cert = load_certificate(path, whose=f"peer {name!r} certificate")
            if party_of(cert) != name:
                raise ConfigError(
                    f"{path} is the certificate of {party_of(cert)!r} but is pinned for {name!r}; "
                    f"ask {name!r} for its own certificate file"
                )
            check_validity(cert, whose=f"peer {name!r}")
            fp = fingerprint(cert)
            if fp in seen:
                raise ConfigError(f"{path}: the same certificate is pinned for {name!r} and for {seen[fp]}")
            seen[fp] = repr(name)
            pins[name] = cert
        return cls(party=party, cert_path=Path(own_cert), key_path=Path(own_key), pins=pins)

    def context(self, *, server_side: bool) -> ssl.SSLContext:
        """An :class:`ssl.SSLContext` for TLS 1.3 only that presents our certificate and trusts only the pins."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.maximum_version = ssl.TLSVersion.TLSv1_3
        if not server_side:
            ctx.check_hostname = False  # identity is the pinned certificate, checked after the handshake
        ctx.verify_mode = ssl.CERT_REQUIRED
        if server_side:
            ctx.num_tickets = 0  # no session resumption: every connection proves its certificate again
        try:
            ctx.load_cert_chain(self.cert_path, self.key_path)
        except ssl.SSLError:
            raise ConfigError(
                f"private key {self.key_path} does not belong to certificate {self.cert_path}; "
                "use the two files `vsplit keys new` wrote together"
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot read {self.key_path}: {exc.strerror}") from None
        pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in self.pins.values())
        ctx.load_verify_locations(cadata=pem)
        return ctx


def identify_peer(der: bytes, *, pins: Mapping[str, x509.Certificate], claimed: str, who: str) -> str:
    """Check that certificate ``der`` is exactly the one pinned for party ``claimed``; return its fingerprint.

    Raises :class:`AuthenticationError` naming the reason: unknown certificate, certificate pinned to another
    party, a common name that is not the party name, or an expired certificate.
    """
    fp = fingerprint(der)
    owner = next((name for name, cert in pins.items() if fingerprint(cert) == fp), None)
    if owner is None:
        raise AuthenticationError(
            f"{who} claims to be {claimed!r} but presents a certificate that is not pinned here (unknown "
            f"certificate, SHA-256 {fp}); compare fingerprints with {claimed!r} out of band"
        )
    if owner != claimed:
        raise AuthenticationError(
            f"{who} claims to be {claimed!r} but presents the certificate pinned to party {owner!r}: "
            "a partner may not speak for another one; check which key each party uses"
        )
    cert = x509.load_der_x509_certificate(der)
    if party_of(cert) != claimed:
        raise AuthenticationError(f"{who}: the certificate pinned for {claimed!r} is issued to {party_of(cert)!r}")
    check_validity(cert, whose=f"{who} ({claimed!r})")
    return fp


__all__ = ["Credentials", "identify_peer"]
