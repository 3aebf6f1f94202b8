"""Create a party's key and certificate, or show a certificate's fingerprint.

Each party runs `keys new` once, sends the certificate (.pem) to its partners, keeps the key (.key) secret, and
reads the fingerprint to each partner over a second channel (phone, signed e-mail). A partner runs `keys show`
on the certificate it received and compares the fingerprint before pinning it in its configuration.

Examples:
  vsplit keys new --party bank --out certs/          # writes certs/bank.key (0600) and certs/bank.pem
  vsplit keys new --party bank --out certs/ --days 365 --force   # replace an existing identity
  vsplit keys show certs/insurer.pem                 # the fingerprint to compare with the insurer's
"""

from __future__ import annotations

import argparse

from vsplit.transport.identity import (
    DEFAULT_DAYS,
    create_identity,
    fingerprint,
    load_certificate,
    party_of,
    write_identity,
)

NAME = "keys"
HELP = "create a party key and certificate, or show a certificate's fingerprint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="keys_action", required=True, metavar="ACTION")
    new = actions.add_parser(
        "new",
        help="create a P-256 key and a self-signed certificate for a party",
        description="Create PARTY.key (owner-only) and PARTY.pem in --out and print the certificate fingerprint.",
        epilog="Example: vsplit keys new --party bank --out certs/",
    )
    new.add_argument("--party", required=True, help="this party's name, e.g. bank (the certificate's common name)")
    new.add_argument("--out", required=True, help="folder for PARTY.key and PARTY.pem (created owner-only if missing)")
    new.add_argument("--days", type=int, default=DEFAULT_DAYS, help=f"validity in days (default {DEFAULT_DAYS})")
    new.add_argument("--force", action="store_true", help="replace an existing key and certificate")
    show = actions.add_parser(
        "show",
        help="print a certificate's party name, validity and SHA-256 fingerprint",
        description="Print a certificate's party name, validity and SHA-256 fingerprint.",
        epilog="Example: vsplit keys show certs/insurer.pem",
    )
    show.add_argument("cert", help="certificate file (.pem)")


def run(args: argparse.Namespace) -> int:
    if args.keys_action == "new":
        files = write_identity(create_identity(args.party, days=args.days), args.out, force=args.force)
        print(f"party:        {files.party}")
        print(f"certificate:  {files.cert_path}   (send this file to your partners)")
        print(f"private key:  {files.key_path}   (keep it secret; never send it)")
        print(f"valid until:  {files.not_after:%Y-%m-%d %H:%M} UTC")
        print(f"SHA-256 fingerprint: {files.fingerprint}")
        print("Read this fingerprint to each partner over a second channel; they check it with `vsplit keys show`.")
        return 0
    cert = load_certificate(args.cert)
    print(f"party:        {party_of(cert)}")
    print(f"valid:        {cert.not_valid_before_utc:%Y-%m-%d %H:%M} to {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")
    print(f"SHA-256 fingerprint: {fingerprint(cert)}")
    return 0
