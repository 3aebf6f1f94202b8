"""Create a party's key and certificate, or show a certificate's fingerprint.

Each party runs `keys new` once, sends the certificate (.pem) to its partners, keeps the key (.key) secret, and
reads the fingerprint to each partner over a second channel (phone, signed e-mail). A partner runs `keys show`
on the certificate it received and compares the fingerprint before pinning it in its configuration.

Examples:
  vsplit keys new --party bank --out certs/          # writes certs/bank.key (0600) and certs/bank.pem
  vsplit keys new --party bank --out certs/ --days 365 --force   # replace an existing identity
  vsplit keys show certs/insurer.pem                 # the fingerprint to compare with the insurer's
  vsplit keys init-seed --config parties/bank/party.toml   # make the party's init seed now (else its first run does)

`keys init-seed` makes the party's secret init seed (``<party>.init-seed`` beside its key, 0600: its initial weights
come from it, docs/privacy.md) before the first run; at the first client of a horizontal split it also makes the
clients' shared ``clients.init-seed``, which that client then copies to every other client, as its certificate.
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
    seed = actions.add_parser(
        "init-seed",
        help="make this party's secret init seed now (and, at the first client of a horizontal split, the clients')",
        description="Make (or keep) the party's <party>.init-seed beside its key, mode 0600, and print where it is; "
                    "at the first client of a horizontal split also clients.init-seed, to copy to the other clients.",
        epilog="Example: vsplit keys init-seed --config parties/bank/party.toml",
    )
    seed.add_argument("--config", required=True, help="the party's party.toml")


def run(args: argparse.Namespace) -> int:
    if args.keys_action == "init-seed":
        return _init_seed(args.config)
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


def _init_seed(path: str) -> int:
    from vsplit.config import load_config
    from vsplit.models.secret import read_or_create, secret_path

    config = load_config(path, check_files=False)
    own = secret_path(config)
    existed = own.exists()
    read_or_create(own)
    print(f"init seed:          {own}   ({'kept' if existed else 'made'}; keep it secret, back it up with the key)")
    topology = config.topology
    if topology.kind == "horizontal" and config.party.name in topology.clients:
        from vsplit.horizontal.shared_seed import clients_init_seed, clients_secret_path

        shared = clients_secret_path(config)
        clients_init_seed(config)  # the first client makes it; any other must hold its copy (the error says so)
        others = ", ".join(c for c in topology.clients if c != config.party.name)
        print(f"clients' init seed: {shared}   (copy it, mode 0600, to {others}; never to the server)")
    return 0
