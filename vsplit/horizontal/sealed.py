"""End-to-end encryption of a relayed hand-off: the server forwards ciphertext it cannot read.

Theory of operation. Every client has a static X25519 key whose public half the other clients know (configured
beside their pinned certificates; generated per run in one process). To seal a state for client B, client A draws
an ephemeral key ``e`` and derives an AES-256-GCM key with HKDF-SHA256 from ``X25519(a, B) || X25519(e, B)``: only
B (holding ``b``) can derive it, and only A (holding ``a``) can have made it, so the relaying server can neither
read nor forge a hand-off. The associated data binds the run, the sender, the recipient, the round and the stage:
a sealed state replayed into another run, stage or pair fails to open. The plaintext is the state's own frame
(:mod:`vsplit.transport.codec`), so opening runs the same size-checked decoder as a state sent in clear.

What it does not hide: that a hand-off happened, between whom, and its size.

Example:
    >>> from vsplit.horizontal.messages import SegmentState
    >>> import numpy as np
    >>> a, b = new_key(), new_key()
    >>> msg = SegmentState.pack(round=0, rows=2, arrays={"w/x": np.ones(2, np.float32)})
    >>> box = seal(msg, sender="a", recipient="b", key=a, recipient_public=public_bytes(b), context=b"run1/h1")
    >>> opened = open_sealed(box, key=b, sender_public=public_bytes(a), context=b"run1/h1")
    >>> opened.arrays()["w/x"].tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

import os

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from vsplit.errors import ProtocolError
from vsplit.horizontal.messages import SealedState, SegmentState
from vsplit.transport import codec

_INFO = b"vsplit-handoff-v1"
_SESSION = bytes(codec.SESSION_BYTES)  # the inner frame's envelope: the binding is in the associated data


def new_key() -> X25519PrivateKey:
    return X25519PrivateKey.generate()


def public_bytes(key: X25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _aad(sender: str, recipient: str, round_: int, context: bytes) -> bytes:
    return b"|".join([_INFO, context, sender.encode(), recipient.encode(), str(round_).encode()])


def _key(static: bytes, ephemeral: bytes, aad: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=aad).derive(static + ephemeral)


def _exchange(key: X25519PrivateKey, public: bytes) -> bytes:
    try:
        return key.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:
        raise ProtocolError("hand-off: a peer's X25519 key is invalid (low order)") from None


def seal(
    state: SegmentState, *, sender: str, recipient: str, key: X25519PrivateKey, recipient_public: bytes,
    context: bytes,
) -> SealedState:
    """Encrypt ``state`` from ``sender`` (static ``key``) to ``recipient`` (static ``recipient_public``)."""
    ephemeral = new_key()
    eph_public = public_bytes(ephemeral)
    aad = _aad(sender, recipient, state.round, context)
    secret = _key(_exchange(key, recipient_public), _exchange(ephemeral, recipient_public), aad + eph_public)
    nonce = os.urandom(12)
    ciphertext = AESGCM(secret).encrypt(nonce, bytes(codec.encode(state, session=_SESSION, seq=0)), aad)
    return SealedState(round=state.round, sender=sender, recipient=recipient, ephemeral=_array(eph_public),
                       nonce=_array(nonce), ciphertext=_array(ciphertext))


def _array(data: bytes) -> np.ndarray:
    return np.frombuffer(data, np.uint8).copy()


def open_sealed(box: SealedState, *, key: X25519PrivateKey, sender_public: bytes, context: bytes) -> SegmentState:
    """Decrypt a sealed state addressed to the holder of ``key``; a :class:`ProtocolError` if it was altered,
    forged, replayed from another context, or is not a state."""
    aad = _aad(box.sender, box.recipient, box.round, context)
    eph_public = box.ephemeral.tobytes()
    secret = _key(_exchange(key, sender_public), _exchange(key, eph_public), aad + eph_public)
    try:
        frame = AESGCM(secret).decrypt(box.nonce.tobytes(), box.ciphertext.tobytes(), aad)
    except InvalidTag:
        raise ProtocolError(f"hand-off from {box.sender!r}: the sealed state does not open (altered, forged or "
                            "from another run)") from None
    _, msg = codec.decode(frame)  # never unpickle peer data: the size-checked decoder of every frame
    if not isinstance(msg, SegmentState) or msg.round != box.round:
        raise ProtocolError(f"hand-off from {box.sender!r}: the sealed message is not the state of round {box.round}")
    return msg
