"""Pinning: a peer is accepted only with exactly the certificate pinned for the party it claims to be."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import pytest
from _transport_support import FAST, credentials, make_identities, short_lived_identity
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from vsplit.errors import AuthenticationError
from vsplit.transport.connect import Listener, dial
from vsplit.transport.identity import create_identity, load_certificate
from vsplit.transport.pinning import Credentials, identify_peer


def der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


@pytest.fixture
def ids(tmp_path):
    return make_identities(tmp_path, ["bank", "insurer", "retailer"])


def test_pinned_certificate_identifies_its_party(ids):
    pins = credentials("bank", ids, ["insurer", "retailer"]).pins
    assert identify_peer(der(pins["insurer"]), pins=pins, claimed="insurer", who="peer") == ids["insurer"].fingerprint


def test_each_refusal_names_its_reason(ids, tmp_path):
    pins = credentials("bank", ids, ["insurer", "retailer"]).pins
    stranger = create_identity("insurer").certificate
    with pytest.raises(AuthenticationError, match="not pinned here \\(unknown certificate, SHA-256"):
        identify_peer(der(stranger), pins=pins, claimed="insurer", who="peer")
    with pytest.raises(AuthenticationError, match="claims to be 'retailer' but presents the certificate pinned to"):
        identify_peer(der(pins["insurer"]), pins=pins, claimed="retailer", who="peer")
    old = load_certificate(short_lived_identity(tmp_path / "old", "insurer", seconds=-30).cert_path)
    with pytest.raises(AuthenticationError, match="certificate expired on"):
        identify_peer(der(old), pins={"insurer": old}, claimed="insurer", who="peer")


def test_partner_rejected_with_a_certificate_it_signed_for_another_party(ids, tmp_path):
    """The insurer signs a 'retailer' certificate with its own key: trusted as an anchor, it must still fail."""
    insurer_key = serialization.load_pem_private_key(ids["insurer"].key_path.read_bytes(), password=None)
    insurer_cert = load_certificate(ids["insurer"].cert_path)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    forged = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "retailer")]))
        .issuer_name(insurer_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(insurer_key, hashes.SHA256())
    )
    chain = tmp_path / "forged.pem"
    chain.write_bytes(forged.public_bytes(serialization.Encoding.PEM) + ids["insurer"].cert_path.read_bytes())
    key_path = tmp_path / "forged.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    hub = Listener(credentials("bank", ids, ["insurer", "retailer"]), address=("127.0.0.1", 0), options=FAST)
    attacker = Credentials(party="retailer", cert_path=chain, key_path=key_path,
                           pins=credentials("insurer", ids, ["bank"]).pins)
    with ThreadPoolExecutor(max_workers=1) as pool:
        accepted = pool.submit(hub.accept_one, timeout_s=5)
        with pytest.raises(AuthenticationError):
            dial(attacker, peer="bank", address=hub.address, deadline_s=5, options=FAST)
        with pytest.raises(AuthenticationError, match="not pinned"):
            accepted.result(timeout=5)
    hub.close()
