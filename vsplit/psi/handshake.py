"""The PSI handshake: what both parties must agree on, and the session salt they derive together.

Each party sends a :class:`~vsplit.psi.messages.Hello` with its protocol version, role, settings, a *binding* (a
hash of the protocol label and the shared run context) and a fresh 32-byte nonce. Each checks the peer's Hello
against its own; any difference stops the run with an abort code saying which kind of mismatch it was. The session
salt is ``SHA-256(tag || binding || label party's nonce || partner's nonce)``: both parties add fresh randomness,
and a party configured with another label or context derives another salt - which is exactly why the binding is
compared first, so that such a party is refused by name instead of silently finding no overlap.

Example:
    >>> cfg = PsiConfig(context="run-7")
    >>> a = make_hello(cfg, role="label", parties=2, normalisation="nfc=1,strip=1,casefold=0")
    >>> b = make_hello(cfg, role="partner", parties=0, normalisation="nfc=1,strip=1,casefold=0")
    >>> check_hello(a, b)
    >>> session_salt(label_hello=a, partner_hello=b) == session_salt(label_hello=a, partner_hello=b)
    True
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.psi.config import PSI_VERSION, PsiConfig
from vsplit.psi.messages import Hello


def binding(config: PsiConfig) -> bytes:
    """SHA-256 of the protocol label and the shared run context: equal iff both are equal."""
    context = config.context.encode()
    data = b"vsplit-psi binding" + bytes([len(config.label)]) + config.label + len(context).to_bytes(4, "big")
    return hashlib.sha256(data + context).digest()


def make_hello(config: PsiConfig, *, role: str, parties: int, normalisation: str, redo: bool = False,
               resume: str = "", done: int = 0) -> Hello:
    """This party's Hello with a fresh nonce. ``parties`` is the run's party count, or 0 to follow the label party;
    ``redo`` says that this side's scalars may be lost, so it may ask for a Redo; ``resume`` and ``done`` describe
    the interrupted session this side kept (:mod:`vsplit.psi.resume`)."""
    return Hello(
        version=PSI_VERSION,
        role=role,
        reveal=config.reveal,
        parties=parties,
        normalisation=normalisation,
        binding=np.frombuffer(binding(config), dtype=np.uint8).copy(),
        nonce=np.frombuffer(os.urandom(32), dtype=np.uint8).copy(),
        buckets=config.buckets,
        redo=redo,
        resume=resume,
        done=done,
    )


def check_hello(mine: Hello, theirs: Hello) -> None:
    """Raise :class:`ProtocolError` (with an :class:`AbortCode`) unless the peer's Hello fits ours."""
    if theirs.version != mine.version:
        raise ProtocolError(
            f"the peer runs PSI protocol version {theirs.version}, this side runs {mine.version}; "
            "install the same vsplit version on both sides",
            code=AbortCode.VERSION_MISMATCH,
        )
    if not np.array_equal(theirs.binding, mine.binding):
        raise ProtocolError(
            "the peer is configured for another PSI session: its protocol label or run context differs, so the "
            "session salts would differ; give every party the same output.run_id (the same "
            "PsiConfig(context=..., label=...) in code)",
            code=AbortCode.SESSION_MISMATCH,
        )
    if theirs.role == mine.role:
        raise ProtocolError(
            f"both sides are configured as the {mine.role} party; exactly one must be the label party (party.role)",
            code=AbortCode.CONFIG_MISMATCH,
        )
    if theirs.reveal != mine.reveal:
        raise ProtocolError(
            f"the peer uses reveal={theirs.reveal!r}, this side reveal={mine.reveal!r}; set the same psi.reveal at "
            "every party",
            code=AbortCode.CONFIG_MISMATCH,
        )
    if theirs.normalisation != mine.normalisation:
        raise ProtocolError(
            f"the peer normalises IDs with {theirs.normalisation!r}, this side with {mine.normalisation!r}; "
            "set the same psi.case_fold in every party's config (the same IdPolicy in code)",
            code=AbortCode.CONFIG_MISMATCH,
        )
    if theirs.buckets != mine.buckets:
        raise ProtocolError(
            f"the peer splits its IDs into {theirs.buckets} buckets, this side into {mine.buckets}; set the same "
            "psi.buckets on both sides",
            code=AbortCode.CONFIG_MISMATCH,
        )
    if mine.parties and theirs.parties and mine.parties != theirs.parties:
        raise ProtocolError(
            f"the peer expects {theirs.parties} parties, this side {mine.parties}; list the same parties on both sides",
            code=AbortCode.CONFIG_MISMATCH,
        )
    if np.array_equal(theirs.nonce, mine.nonce):
        raise ProtocolError("the peer echoed this side's nonce", code=AbortCode.PROTOCOL_VIOLATION)


def session_salt(*, label_hello: Hello, partner_hello: Hello) -> bytes:
    """The 32-byte salt of this pair's session, the same on both sides."""
    data = b"vsplit-psi salt" + label_hello.binding.tobytes() + label_hello.nonce.tobytes()
    return hashlib.sha256(data + partner_hello.nonce.tobytes()).digest()
