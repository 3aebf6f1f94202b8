"""What a tree of the vertical boosting core (vsplit.boosting) costs; prints one JSON object.

    python benchmarks/boosting_core.py [--rows 10000 20000] [--trees 2] [--depth 5] [--key-bits 2048]
                                       [--out benchmarks/results-boosting-core.json]

A bank (5 numeric columns and the label) and one partner (10 numeric columns) of seeded synthetic rows, 32 bins a
column, Okamoto-Uchiyama keys. Both machines run in this one process over the in-process runner's memory channels, so
the bank's and the partner's work share one core and add up: this measures the protocol's work, not a pilot between
two machines (`benchmarks/boosting.py`, with the node over mutual TLS, is issue 46's). Each phase is timed by
wrapping the function that does it:

  rows.<n>.seconds_per_tree        wall time per tree, both parties
  rows.<n>.encrypt_s               the bank: gradients and hessians packed and encrypted, per tree
  rows.<n>.partner_histograms_s    the partner: ciphertext sums per node, column and bin (packing included)
  rows.<n>.pack_s                  the partner: several sums packed into one plaintext before they go back
  rows.<n>.decrypt_s               the bank: the packed sums decrypted
  rows.<n>.bytes_to_partner / bytes_to_bank   encoded frames per tree, each way
  load_average                     os.getloadavg() at the start and the end (the machine is shared)
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import vsplit.boosting.backend as backend_module
import vsplit.boosting.label as label_module
import vsplit.boosting.partner as partner_module
from vsplit.boosting import BoostParams, LabelBoost, PartnerBoost, fit_bins
from vsplit.he import generate_keypair
from vsplit.runtime.inprocess import connect, run_machines

BINS = 32


def timed(owner: Any, name: str, into: Counter, key: str) -> Callable[[], None]:
    """Wrap ``owner.name`` so its seconds add up in ``into[key]``; returns the undo."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            into[key] += time.perf_counter() - start

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, original)


def one(rows: int, *, trees: int, depth: int, key_bits: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    bank, shop = rng.normal(size=(rows, 5)), rng.normal(size=(rows, 10))
    y = (bank[:, 0] + shop[:, 1] + rng.normal(size=rows) > 0).astype(float)
    bank_bins, shop_bins = fit_bins(bank, max_bins=BINS), fit_bins(shop, max_bins=BINS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test-only flag warns below 2048 bits
        keys = generate_keypair(key_bits=key_bits, insecure_small_key_for_tests=key_bits < 2048)
    seconds: Counter = Counter()
    undo = [timed(backend_module.SerialBackend, "encrypt", seconds, "encrypt_s"),
            timed(label_module, "decrypt_sums", seconds, "decrypt_s"),
            timed(backend_module, "pack_sums", seconds, "pack_s"),
            timed(partner_module.PartnerBoost, "_level_sums", seconds, "partner_histograms_s")]
    sent: Counter = Counter()

    def tap(sender: str, recipient: str, message: Any, frame: bytes) -> None:
        sent["bytes_to_partner" if sender == "bank" else "bytes_to_bank"] += len(frame)

    machines = {"bank": LabelBoost(bank_bins.transform(bank), width=BINS + 1, labels=y, partners=["shop"],
                                   params=BoostParams(trees=trees, max_depth=depth), keys=keys),
                "shop": PartnerBoost(shop_bins.transform(shop), width=BINS + 1, min_key_bits=key_bits,
                                     insecure_small_key_for_tests=key_bits < 2048)}
    start = time.perf_counter()
    try:
        run_machines(connect(["bank", "shop"], session=os.urandom(16), taps=[tap]), machines)
    finally:
        for u in undo:
            u()
    total = time.perf_counter() - start
    out = {"seconds_per_tree": round(total / trees, 3)}
    out.update({k: round(v / trees, 3) for k, v in sorted(seconds.items())})
    out.update({k: v // trees for k, v in sorted(sent.items())})
    out.update(bank_columns=5, partner_columns=10, bins=BINS, depth=depth, trees=trees)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 20_000])
    parser.add_argument("--trees", type=int, default=2)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--out", default=str(Path(__file__).with_name("results-boosting-core.json")))
    args = parser.parse_args()
    start = os.getloadavg()
    result: dict[str, Any] = {"key_bits": args.key_bits, "scheme": "ou", "rows": {}}
    for rows in args.rows:
        result["rows"][str(rows)] = one(rows, trees=args.trees, depth=args.depth, key_bits=args.key_bits)
    result["load_average"] = {"start": [round(x, 2) for x in start], "end": [round(x, 2) for x in os.getloadavg()]}
    text = json.dumps(result, indent=1)
    Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
