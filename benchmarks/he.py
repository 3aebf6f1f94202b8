"""What the homomorphic layer (vsplit.he) costs per operation; prints one JSON object.

    python benchmarks/he.py [--rows 20000] [--bins 32] [--key-bits 2048] [--out benchmarks/results-he.json]

Output: {"<scheme>": {"key_bits", "keygen_s", "encrypt_us" (one packed gradient+hessian row), "add_us" (one
ciphertext addition), "sum_ms" (``--rows`` rows into ``--bins`` groups with group_sums), "sum_us_per_row",
"subtract_us" (one sibling bin), "pack_us_per_sum" (pack_sums, per group sum), "sums_per_plaintext",
"decrypt_us" (one ciphertext), "decrypt_us_per_sum_packed", "encode_us"/"decode_us" (the wire message, per
ciphertext), "cpu_over_wall" (about 1: one thread)}}. Encryption is timed on a sample of rows (Paillier: 500) and
the sample is repeated to ``--rows`` ciphertexts for the sums, so one run takes well under a minute on this machine.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from vsplit.he import (
    Packing,
    decode_ciphertexts,
    decrypt_sums,
    encode_ciphertexts,
    encrypt_rows,
    generate_keypair,
    group_sums,
    pack_sums,
    subtract,
)
from vsplit.he.crypt import Ciphertexts

SAMPLE = {"ou": 4000, "paillier": 500}


class Clock:
    """Wall and CPU time of a block."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def measure(scheme: str, *, rows: int, bins: int, key_bits: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    wall = cpu = 0.0
    with Clock() as keygen:
        keys = generate_keypair(scheme=scheme, key_bits=key_bits, insecure_small_key_for_tests=key_bits < 2048)
    public = keys.public
    packing = Packing.plan(scale=2**16, bounds=(1.0, 0.25), max_rows=rows, plaintext_bits=public.plaintext_bits)
    sample = min(SAMPLE[scheme], rows)
    grad_hess = np.c_[rng.uniform(-1, 1, sample), rng.uniform(0, 0.25, sample)]
    with Clock() as enc:
        column = encrypt_rows(public, grad_hess, packing=packing)
    column = Ciphertexts(public=public, array=column.array[(np.arange(rows) % sample).tolist()])
    evaluator = public.kit.evaluator()
    with Clock() as add:
        evaluator.add(column.array, column.array)
    codes = rng.integers(0, bins, rows)
    with Clock() as summed:
        parent = group_sums(column, codes, n_groups=bins)
    node = group_sums(column, np.where(rng.random(rows) < 0.5, codes, -1), n_groups=bins)
    with Clock() as sub:
        subtract(parent, node)
    with Clock() as packed_clock:
        packed = pack_sums(parent, packing=packing)
    with Clock() as dec:
        decrypt_sums(keys, parent, packing=packing, count=bins)
    with Clock() as dec_packed:
        decrypt_sums(keys, packed, packing=packing, count=bins, sums_per_plaintext=packing.sums_per_plaintext)
    with Clock() as encode:
        frame = encode_ciphertexts(column)
    with Clock() as decode:
        decode_ciphertexts(frame, public=public, expected_count=rows)
    for clock in (enc, add, summed, sub, packed_clock, dec, dec_packed, encode, decode):
        wall, cpu = wall + clock.wall, cpu + clock.cpu
    return {
        "key_bits": key_bits,
        "keygen_s": round(keygen.wall, 2),
        "encrypt_us": round(enc.wall / sample * 1e6, 1),
        "add_us": round(add.wall / rows * 1e6, 2),
        "sum_ms": round(summed.wall * 1e3, 1),
        "sum_us_per_row": round(summed.wall / rows * 1e6, 2),
        "subtract_us": round(sub.wall / bins * 1e6, 1),
        "pack_us_per_sum": round(packed_clock.wall / bins * 1e6, 1),
        "sums_per_plaintext": packing.sums_per_plaintext,
        "decrypt_us": round(dec.wall / bins * 1e6, 1),
        "decrypt_us_per_sum_packed": round(dec_packed.wall / bins * 1e6, 1),
        "encode_us": round(encode.wall / rows * 1e6, 2),
        "decode_us": round(decode.wall / rows * 1e6, 2),
        "cpu_over_wall": round(cpu / wall, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--bins", type=int, default=32)
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = {scheme: measure(scheme, rows=args.rows, bins=args.bins, key_bits=args.key_bits)
                  for scheme in ("ou", "paillier")}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
