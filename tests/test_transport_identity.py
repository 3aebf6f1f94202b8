"""Party identities and the `vsplit keys` command."""

from __future__ import annotations

import datetime as dt
import os
import re

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from vsplit.cli.main import main
from vsplit.errors import AuthenticationError, ConfigError
from vsplit.transport.identity import (
    check_validity,
    create_identity,
    fingerprint,
    load_certificate,
    party_of,
    write_identity,
)

FINGERPRINT = re.compile(r"SHA-256 fingerprint: ((?:[0-9A-F]{2}:){31}[0-9A-F]{2})")


def test_new_identity_is_a_p256_self_signed_leaf_named_after_the_party():
    ident = create_identity("bank", days=10)
    cert = ident.certificate
    assert party_of(cert) == "bank" and cert.issuer == cert.subject
    assert isinstance(ident.key.curve, ec.SECP256R1)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    lifetime = cert.not_valid_after_utc - dt.datetime.now(dt.timezone.utc)
    assert dt.timedelta(days=9, hours=23) < lifetime <= dt.timedelta(days=10)
    cert.verify_directly_issued_by(cert)  # self-signed


def test_key_file_is_owner_only_even_with_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        files = write_identity(create_identity("bank"), tmp_path / "certs")
    finally:
        os.umask(old)
    assert files.key_path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "certs").stat().st_mode & 0o777 == 0o700
    assert not [p for p in (tmp_path / "certs").iterdir() if p.name.startswith(".")]  # no temporary file left
    key = serialization.load_pem_private_key(files.key_path.read_bytes(), password=None)
    assert key.public_key() == load_certificate(files.cert_path).public_key()


def test_existing_identity_kept_unless_forced(tmp_path):
    first = write_identity(create_identity("bank"), tmp_path)
    with pytest.raises(ConfigError, match="already exists; pass --force"):
        write_identity(create_identity("bank"), tmp_path)
    assert fingerprint(load_certificate(first.cert_path)) == first.fingerprint
    second = write_identity(create_identity("bank"), tmp_path, force=True)
    assert second.fingerprint != first.fingerprint
    assert fingerprint(load_certificate(second.cert_path)) == second.fingerprint


def test_validity_checked_with_a_reason():
    now = dt.datetime.now(dt.timezone.utc)
    expired = create_identity("bank", days=1, not_before=now - dt.timedelta(days=3)).certificate
    with pytest.raises(AuthenticationError, match=r"partner 'bank' certificate expired on .*--party bank --force"):
        check_validity(expired, whose="partner 'bank'")
    future = create_identity("bank", days=1, not_before=now + dt.timedelta(days=1)).certificate
    with pytest.raises(AuthenticationError, match=r"valid only from .* check both machines. clocks"):
        check_validity(future, whose="partner 'bank'")


def test_unusable_party_names_and_files_refused(tmp_path):
    for name in ("", "../bank", "bank/x", "a" * 65, "-bank"):
        with pytest.raises(ConfigError, match="not allowed"):
            create_identity(name)
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"is not an X\.509 certificate"):
        load_certificate(tmp_path / "junk.pem")


def test_keys_new_prints_the_fingerprint_and_keys_show_repeats_it(tmp_path, capsys):
    assert main(["keys", "new", "--party", "bank", "--out", str(tmp_path), "--days", "30"]) == 0
    printed = FINGERPRINT.search(capsys.readouterr().out).group(1)
    assert main(["keys", "show", str(tmp_path / "bank.pem")]) == 0
    out = capsys.readouterr().out
    assert FINGERPRINT.search(out).group(1) == printed
    assert "party:        bank" in out
    assert printed == fingerprint(load_certificate(tmp_path / "bank.pem"))


def test_keys_new_refuses_to_overwrite_without_force(tmp_path, capsys):
    assert main(["keys", "new", "--party", "bank", "--out", str(tmp_path)]) == 0
    before = (tmp_path / "bank.key").read_bytes()
    assert main(["keys", "new", "--party", "bank", "--out", str(tmp_path)]) == 1
    assert "already exists; pass --force" in capsys.readouterr().err
    assert (tmp_path / "bank.key").read_bytes() == before
    assert main(["keys", "new", "--party", "bank", "--out", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "bank.key").read_bytes() != before


def test_keys_show_names_the_fix_for_a_missing_file(tmp_path, capsys):
    assert main(["keys", "show", str(tmp_path / "insurer.pem")]) == 1
    assert "vsplit keys new" in capsys.readouterr().err


def test_keys_help_shows_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["keys", "--help"])
    assert "vsplit keys new --party bank --out certs/" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["keys", "new", "--help"])
    assert "Example: vsplit keys new" in capsys.readouterr().out
