"""The homomorphic layer (vsplit.he), known answers first: encrypt, sum by groups, subtract, pack, decrypt equals
numpy's integer sums exactly, for OU and Paillier, packed and unpacked, negatives included; keys of the wrong scheme
or size are refused; a ciphertext message is checked before a byte is decoded.

Keys are small (OU 1024, Paillier 512) behind the layer's test-only flag, and made once per module.
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

pytest.importorskip("heu")

from vsplit.errors import ConfigError, DataError, ProtocolError
from vsplit.he import (
    Packing,
    PublicKey,
    decode_ciphertexts,
    decrypt_sums,
    encode_ciphertexts,
    encrypt_rows,
    generate_keypair,
    group_sums,
    heu_bytes,
    pack_sums,
    subtract,
)
from vsplit.he import keys as he_keys

SMALL = {"ou": 1024, "paillier": 512}
pytestmark = pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning")


@pytest.fixture(scope="module", params=["ou", "paillier"])
def run(request):
    """The label party's keys and the partner's copy of the public key, read from the key message."""
    scheme = request.param
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        keys = generate_keypair(scheme=scheme, key_bits=SMALL[scheme], insecure_small_key_for_tests=True)
        partner_key = PublicKey.from_bytes(keys.public.to_bytes(), schemes=(scheme,), min_key_bits=SMALL[scheme],
                                           insecure_small_key_for_tests=True)
    return keys, partner_key


@pytest.fixture(scope="module")
def ou_run():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        keys = generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)
    return keys


def plan(public, *, rows: int, bounds=(10.0, 10.0), scale: int = 100) -> Packing:
    return Packing.plan(scale=scale, bounds=bounds, max_rows=rows, plaintext_bits=public.plaintext_bits)


def integer_sums(ints: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    inside = codes >= 0
    sums = np.stack([np.bincount(codes[inside], weights=ints[inside, j], minlength=n_groups)
                     for j in range(ints.shape[1])], axis=1)
    return np.rint(sums).astype(np.int64) if np.issubdtype(ints.dtype, np.integer) else sums


def test_partner_reads_the_same_key_from_the_key_message(run):
    keys, partner_key = run
    assert partner_key.fingerprint == keys.public.fingerprint
    assert partner_key.plaintext_bits == keys.public.plaintext_bits and partner_key.width == keys.public.width


@pytest.mark.parametrize("packed_back", [False, True], ids=["one-sum-a-ciphertext", "sums-packed"])
def test_bin_sums_of_gradients_and_hessians_equal_numpy_sums_exactly(run, packed_back):
    keys, partner_key = run
    rng = np.random.default_rng(7)
    rows, n_groups = 300, 9
    values = rng.integers(-1000, 1001, size=(rows, 2)) / 100.0  # negatives, and both bounds
    values[:2] = [[10.0, -10.0], [-10.0, 10.0]]
    packing = plan(keys.public, rows=rows)
    frame = encode_ciphertexts(encrypt_rows(keys.public, values, packing=packing))
    column = decode_ciphertexts(frame, public=partner_key, expected_count=rows)  # at the partner
    codes = rng.integers(-1, n_groups, size=rows)  # -1: rows outside the node
    sums = group_sums(column, codes, n_groups=n_groups)
    per = packing.sums_per_plaintext if packed_back else 1
    if packed_back:
        sums = pack_sums(sums, packing=packing)
        assert len(sums) == -(-n_groups // per) < n_groups
    back = decode_ciphertexts(encode_ciphertexts(sums), public=keys.public, expected_count=len(sums))
    got = decrypt_sums(keys, back, packing=packing, count=n_groups, sums_per_plaintext=per)
    assert np.array_equal(got, integer_sums(np.rint(values * 100).astype(np.int64), codes, n_groups))
    assert np.allclose(packing.rescale(got), integer_sums(values, codes, n_groups))


def test_labels_count_events_per_bin(run):
    keys, partner_key = run
    labels = np.array([1, 0, 1, 1, 0, 0, 1, 0], dtype=float)
    packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=8, plaintext_bits=keys.public.plaintext_bits)
    column = decode_ciphertexts(encode_ciphertexts(encrypt_rows(keys.public, labels, packing=packing)),
                                public=partner_key)
    bins = np.array([0, 0, 1, 1, 1, 2, 2, 2])
    events = decrypt_sums(keys, group_sums(column, bins, n_groups=3), packing=packing, count=3).ravel()
    assert events.tolist() == [1, 2, 1]


def test_sums_at_the_edge_of_the_plan_stay_exact_with_every_digit_full(ou_run):
    keys = ou_run
    rows = 64
    packing = Packing.plan(scale=1000, bounds=(2.0, 2.0, 2.0), max_rows=rows,
                           plaintext_bits=keys.public.plaintext_bits)
    values = np.tile([[2.0, -2.0, 2.0]], (rows, 1))
    values[1::2] = [[-2.0, 2.0, 2.0]]
    codes = np.r_[np.zeros(rows // 2, int), np.ones(rows // 2, int)]
    sums = pack_sums(group_sums(encrypt_rows(keys.public, values, packing=packing), codes * 0, n_groups=2),
                     packing=packing)
    got = decrypt_sums(keys, sums, packing=packing, count=2, sums_per_plaintext=packing.sums_per_plaintext)
    assert got.tolist() == [[0, 0, rows * 2000], [0, 0, 0]]
    every_minus = encrypt_rows(keys.public, -np.full((rows, 3), 2.0), packing=packing)
    got = decrypt_sums(keys, group_sums(every_minus, np.zeros(rows, int), n_groups=1), packing=packing, count=1)
    assert got.tolist() == [[-rows * 2000] * 3]


def test_sibling_by_histogram_subtraction_equals_its_direct_sum(run):
    keys, _ = run
    rng = np.random.default_rng(3)
    rows, n_groups = 200, 6
    values = rng.uniform(-1, 1, size=(rows, 2))
    packing = plan(keys.public, rows=rows, bounds=(1.0, 1.0), scale=2**12)
    column = encrypt_rows(keys.public, values, packing=packing)
    bins = rng.integers(0, n_groups, size=rows)
    left = rng.random(rows) < 0.4
    parent = group_sums(column, bins, n_groups=n_groups)
    node = group_sums(column, np.where(left, bins, -1), n_groups=n_groups)
    direct = group_sums(column, np.where(left, -1, bins), n_groups=n_groups)
    by_subtraction = decrypt_sums(keys, subtract(parent, node), packing=packing, count=n_groups)
    assert np.array_equal(by_subtraction, decrypt_sums(keys, direct, packing=packing, count=n_groups))


def test_equal_labels_give_different_ciphertexts_on_the_wire(ou_run):
    keys = ou_run
    packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=4, plaintext_bits=keys.public.plaintext_bits)
    frame = encode_ciphertexts(encrypt_rows(keys.public, np.ones(4), packing=packing))
    body = frame[-4 * keys.public.width :]
    cells = {body[i * keys.public.width : (i + 1) * keys.public.width] for i in range(4)}
    assert len(cells) == 4  # randomised encryption: a partner cannot group rows by label


def test_key_under_2048_bits_refused_without_the_test_only_flag():
    with pytest.raises(ConfigError, match="2048"):
        generate_keypair(scheme="ou", key_bits=1024)
    with pytest.raises(ConfigError, match="unknown"):
        generate_keypair(scheme="rsa")
    with pytest.raises(ConfigError, match="test-only flag needs"):
        generate_keypair(scheme="ou", key_bits=512, insecure_small_key_for_tests=True)
    with pytest.warns(UserWarning, match="tests only"):
        generate_keypair(scheme="paillier", key_bits=512, insecure_small_key_for_tests=True)


def test_partner_refuses_a_key_of_another_scheme_or_below_its_minimum(run):
    keys, _ = run
    message = keys.public.to_bytes()
    other = "paillier" if keys.public.scheme == "ou" else "ou"
    with pytest.raises(ProtocolError, match="not one this party accepts"):
        PublicKey.from_bytes(message, schemes=(other,), min_key_bits=512, insecure_small_key_for_tests=True)
    with pytest.raises(ProtocolError, match="this party accepts 2048"):
        PublicKey.from_bytes(message, schemes=(keys.public.scheme,))  # the default minimum: 2048 bits


def test_partner_refuses_a_forged_plaintext_size_before_sf_heu_builds_its_tables(ou_run):
    """sf-heu sizes a precomputed table by OU's plaintext bits: 6,000 bits cost it ~4 s here, 2**32 never ends."""
    keys = ou_run
    message = bytearray(keys.public.to_bytes())
    message[9:11] = (6000).to_bytes(2, "big")  # the header's plaintext-bits field
    started = time.perf_counter()
    with pytest.raises(ProtocolError, match="plaintext bits"):
        PublicKey.from_bytes(bytes(message), min_key_bits=1024, insecure_small_key_for_tests=True)
    assert time.perf_counter() - started < 0.5


def test_oversize_or_miscounted_ciphertext_message_refused_before_decoding(ou_run, monkeypatch):
    keys = ou_run
    packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=3, plaintext_bits=keys.public.plaintext_bits)
    frame = encode_ciphertexts(encrypt_rows(keys.public, np.ones(3), packing=packing))

    def never(*args, **kwargs):
        raise AssertionError("decoded before the checks")

    monkeypatch.setattr(heu_bytes, "matrix_to_ciphertexts", never)
    with pytest.raises(ProtocolError, match="cap"):
        decode_ciphertexts(frame, public=keys.public, max_bytes=len(frame) - 1)
    with pytest.raises(ProtocolError, match="expects 4"):
        decode_ciphertexts(frame, public=keys.public, expected_count=4)
    with pytest.raises(ProtocolError, match="header declares"):
        decode_ciphertexts(frame[:-1], public=keys.public)
    empty = frame[:13] + (0).to_bytes(4, "big") + frame[17:19]  # sf-heu would crash the process loading it
    with pytest.raises(ProtocolError, match="0 ciphertexts"):
        decode_ciphertexts(empty, public=keys.public)
    forged_count = frame[:13] + (10**6).to_bytes(4, "big") + frame[17:]
    with pytest.raises(ProtocolError, match="header declares"):
        decode_ciphertexts(forged_count, public=keys.public)
    at_modulus = frame[: -keys.public.width] + keys.public.modulus.to_bytes(keys.public.width, "big")
    with pytest.raises(ProtocolError, match="not below the key's modulus"):
        decode_ciphertexts(at_modulus, public=keys.public)
    with pytest.raises(ProtocolError, match="0 or not below"):
        decode_ciphertexts(frame[: -keys.public.width] + bytes(keys.public.width), public=keys.public)


def test_ciphertexts_under_another_key_refused(ou_run, run):
    keys, partner_key = run
    packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=2, plaintext_bits=ou_run.public.plaintext_bits)
    frame = encode_ciphertexts(encrypt_rows(ou_run.public, np.ones(2), packing=packing))
    assert partner_key.fingerprint != ou_run.public.fingerprint  # two runs, two keys
    with pytest.raises(ProtocolError, match="another key"):
        decode_ciphertexts(frame, public=partner_key)
    with pytest.raises(ProtocolError, match="another public key"):
        decrypt_sums(keys, encrypt_rows(ou_run.public, np.ones(2), packing=packing), packing=packing, count=2)


def test_packing_refuses_what_does_not_fit_and_values_out_of_bounds():
    with pytest.raises(ConfigError, match="do not fit"):
        Packing.plan(scale=2**30, bounds=(1.0, 1.0, 1.0), max_rows=10**6, plaintext_bits=120)
    with pytest.raises(ConfigError, match="more than 63"):
        Packing.plan(scale=2**40, bounds=(1.0,), max_rows=10**8, plaintext_bits=2000)
    packing = Packing.plan(scale=100, bounds=(1.0, 0.25), max_rows=10, plaintext_bits=600)
    with pytest.raises(DataError, match=r"slot 1 exceeds its bound 0\.25"):
        packing.pack(np.array([[0.5, 0.5]]))
    with pytest.raises(DataError, match="NaN"):
        packing.pack(np.array([[np.nan, 0.0]]))
    with pytest.raises(DataError, match="planned for 10"):
        packing.pack(np.zeros((11, 2)))


def test_no_rows_to_encrypt_is_a_data_error(ou_run):
    packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=3, plaintext_bits=ou_run.public.plaintext_bits)
    with pytest.raises(DataError, match="no rows"):
        encrypt_rows(ou_run.public, np.zeros(0), packing=packing)


def test_a_bin_smaller_than_the_minimum_group_size_is_refused(ou_run):
    keys = ou_run
    packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=6, plaintext_bits=keys.public.plaintext_bits)
    column = encrypt_rows(keys.public, np.ones(6), packing=packing)
    with pytest.raises(DataError, match="group 1 has 1 rows"):
        group_sums(column, np.array([0, 0, 0, 1, 2, 2]), n_groups=3, min_group_size=2)
    with pytest.raises(DataError, match=r"-1\.\.2"):
        group_sums(column, np.array([0, 0, 0, 1, 3, 2]), n_groups=3)


def test_import_vsplit_he_does_not_import_sf_heu():
    code = "import sys, vsplit, vsplit.he; print('heu' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_without_sf_heu_the_error_names_the_extra(monkeypatch):
    for name in ("heu", "heu.phe", "heu.numpy"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ConfigError, match=r"pip install 'vsplit\[he\]'"):
        he_keys.generate_keypair(scheme="ou")
