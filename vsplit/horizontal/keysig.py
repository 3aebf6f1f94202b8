"""Hand-off keys signed with each client's pinned identity: a relaying server cannot swap them for its own.

Theory of operation. A sealed hand-off (:mod:`vsplit.horizontal.sealed`) is only as private as the X25519 public
keys it is sealed to. Between processes each client draws a fresh X25519 key per run and sends its public half in
its join; the server relays every client's key in the roster. A server that swapped a key for one of its own could
open the hand-offs sealed to it, so each client signs ``(run id, its name, its X25519 public key)`` with the private
key of its TLS identity (ECDSA P-256, the key its pinned certificate certifies), and each client checks every other
client's signature against that client's pinned certificate (``network.client_certs``) before it seals or opens
anything. A substituted key, or a key moved to another client or run, fails the check and the run stops.

Example:
    >>> from vsplit.transport.identity import create_identity
    >>> me = create_identity("bank_1")
    >>> sig = sign_key(me.key, run_id="r1", client="bank_1", public=bytes(32))
    >>> verify_key(me.certificate, sig, run_id="r1", client="bank_1", public=bytes(32))
    >>> verify_key(me.certificate, sig, run_id="r1", client="bank_1", public=bytes([1]) * 32)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.AuthenticationError: the hand-off key of 'bank_1' is not signed by its pinned certificate: ...
"""

from __future__ import annotations

from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from vsplit.errors import AuthenticationError

_DOMAIN = b"vsplit-handoff-key-v1"
#: a DER ECDSA P-256 signature is at most 72 bytes
MAX_SIGNATURE = 80


def _message(run_id: str, client: str, public: bytes) -> bytes:
    return b"|".join([_DOMAIN, run_id.encode(), client.encode(), public])


def sign_key(private_key: Any, *, run_id: str, client: str, public: bytes) -> bytes:
    """``client``'s signature over its X25519 ``public`` key for run ``run_id``."""
    return bytes(private_key.sign(_message(run_id, client, public), ec.ECDSA(hashes.SHA256())))


def verify_key(certificate: Any, signature: bytes, *, run_id: str, client: str, public: bytes) -> None:
    """Check ``client``'s ``signature`` with its pinned ``certificate``; :class:`AuthenticationError` if it fails."""
    try:
        certificate.public_key().verify(signature, _message(run_id, client, public), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, TypeError):
        raise AuthenticationError(f"the hand-off key of {client!r} is not signed by its pinned certificate: the "
                                  "relaying server or a stranger changed it; stop and check the certificates") from None
