"""The homomorphic layer's two decoders of a peer's bytes, fuzzed: a ciphertext-array message and a public-key
message either decode to exactly what was declared or raise :class:`~vsplit.errors.ProtocolError`, quickly, and sf-heu
never parses a peer's bytes (unchecked, it raises half a dozen exception types, ``MemoryError`` among them, and a
single flipped byte of a key cost it 23 s here).
"""

from __future__ import annotations

import struct
import time
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("heu")

from vsplit.errors import ProtocolError
from vsplit.he import Packing, PublicKey, decode_ciphertexts, encode_ciphertexts, encrypt_rows, generate_keypair

pytestmark = pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning")
FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
KEYS_FUZZ = settings(max_examples=120, deadline=2000, suppress_health_check=[HealthCheck.too_slow],
                     derandomize=True)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    KEYS = {scheme: generate_keypair(scheme=scheme, key_bits=bits, insecure_small_key_for_tests=True)
            for scheme, bits in (("ou", 1024), ("paillier", 512))}
ROWS = 3


def _frame(scheme: str) -> bytes:
    public = KEYS[scheme].public
    packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=ROWS, plaintext_bits=public.plaintext_bits)
    return encode_ciphertexts(encrypt_rows(public, np.array([1.0, 0.0, -1.0]), packing=packing))


FRAMES = {scheme: _frame(scheme) for scheme in KEYS}


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "word"]))
        at = draw(st.integers(min_value=0, max_value=min(len(data), 40) if draw(st.booleans()) else len(data)))
        if kind == "flip" and at < len(data):
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif kind == "delete":
            del data[at : at + draw(st.integers(min_value=1, max_value=12))]
        else:  # counts, widths and sizes at their edges
            data[at : at + 4] = struct.pack(">I", draw(st.sampled_from([0, 1, 2**16 - 1, 2**31, 2**32 - 1])))
    return bytes(data)


def decodes_or_refuses(data: bytes, scheme: str) -> None:
    started = time.perf_counter()
    try:
        column = decode_ciphertexts(data, public=KEYS[scheme].public)
    except ProtocolError:
        pass
    else:
        assert len(column) == struct.unpack_from(">I", data, 13)[0]
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("scheme", sorted(KEYS))
@FUZZ
@given(data=st.data())
def test_mutated_ciphertext_messages_decode_as_declared_or_raise_protocol_error(scheme, data):
    decodes_or_refuses(data.draw(mutated(FRAMES[scheme])), scheme)


@FUZZ
@given(garbage=st.binary(max_size=2000))
def test_random_bytes_as_a_ciphertext_message_raise_protocol_error(garbage):
    with pytest.raises(ProtocolError):
        decode_ciphertexts(garbage, public=KEYS["ou"].public)


@pytest.mark.parametrize("cut", range(0, 19 + 3 * 129, 7))
def test_every_truncated_ciphertext_message_is_refused(cut):
    with pytest.raises(ProtocolError):
        decode_ciphertexts(FRAMES["ou"][:cut], public=KEYS["ou"].public)


@pytest.mark.parametrize("scheme", sorted(KEYS))
@KEYS_FUZZ
@given(data=st.data())
def test_mutated_public_key_messages_load_or_raise_protocol_error(scheme, data):
    message = data.draw(mutated(KEYS[scheme].public.to_bytes()))
    started = time.perf_counter()
    try:
        key = PublicKey.from_bytes(message, schemes=(scheme,), min_key_bits=512, insecure_small_key_for_tests=True)
    except ProtocolError:
        pass
    else:
        assert key.scheme == scheme and key.key_bits >= 512
    assert time.perf_counter() - started < 1.0


@st.composite
def forged_frames(draw) -> bytes:
    """A header with this run's key and scheme, attacker-chosen count and width, and a body of exactly that size."""
    public = KEYS["ou"].public
    count = draw(st.sampled_from([0, 1, 2, 3, 255]))
    width = draw(st.sampled_from([public.width, public.width - 1, public.width + 1, 0]))
    cell = draw(st.sampled_from([bytes(width), b"\xff" * width, public.modulus.to_bytes(public.width, "big")[:width],
                                 (public.modulus - 1).to_bytes(public.width, "big")[:width]]))
    body = cell * count if draw(st.booleans()) else FRAMES["ou"][19:][: count * width]
    head = b"VHC1" + public.fingerprint + bytes([1]) + struct.pack(">IH", count, width)
    return head + body


@FUZZ
@given(frame=forged_frames())
def test_forged_headers_with_exact_lengths_decode_as_declared_or_raise_protocol_error(frame):
    decodes_or_refuses(frame, "ou")
