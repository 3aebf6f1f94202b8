"""The horizontal presets' skew, MNIST-1D's generation time and secure aggregation's cost.

    python benchmarks/horizontal_data.py [--out benchmarks/results-horizontal-data.json]

Prints one JSON object: ``skew`` keyed ``"<data>/<scheme>[:<by>]/<clients>"`` with each client's rows, positive
rate (binary labels), label TVD and ``by``-column TVD from the pooled train rows (see
:mod:`vsplit.datasets.horizontal`); ``mnist1d_generate_s`` (one local generation, import excluded);
``secure_agg`` keyed ``"<clients>x<values>"`` with the seconds of one in-process aggregation (all machines, masks
included, median of 3) and the bytes each client sends, next to the plain float32 update's bytes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from vsplit.datasets import horizontal
from vsplit.datasets.horizontal import horizontal_split
from vsplit.federated.secagg_messages import MaskedInput, encode_frame
from vsplit.federated.secure_agg import SecAggClient, SecAggConfig, SecAggServer, run_in_memory

SPLITS = [
    ("default_credit", "iid", "EDUCATION", 3), ("default_credit", "iid", "EDUCATION", 5),
    ("default_credit", "non_iid", "EDUCATION", 3), ("default_credit", "non_iid", "EDUCATION", 4),
    ("default_credit", "non_iid", "EDUCATION", 5), ("default_credit", "non_iid", "LIMIT_BAL", 3),
    ("default_credit", "non_iid", "LIMIT_BAL", 5), ("digits", "iid", "digit", 4), ("digits", "non_iid", "digit", 4),
    ("mnist1d", "iid", "digit", 4), ("mnist1d", "non_iid", "digit", 4),
]


def skew() -> dict:
    out = {}
    for name, scheme, by, clients in SPLITS:
        table = horizontal_split(name, clients=clients, scheme=scheme, by=by, seed=0).skew()
        out[f"{name}/{scheme}:{by}/{clients}"] = {
            client: {key: (round(float(v), 4) if isinstance(v, float) else int(v)) for key, v in row.items()}
            for client, row in table.to_dict(orient="index").items()
        }
    return out


def mnist1d_seconds() -> float:
    horizontal.mnist1d_arrays()  # import the package once
    horizontal.mnist1d_arrays.cache_clear()
    start = time.perf_counter()
    horizontal.mnist1d_arrays()
    return round(time.perf_counter() - start, 3)


def secure_agg(clients: int, length: int) -> dict:
    rng = np.random.default_rng(0)
    names = tuple(f"bank_{i + 1}" for i in range(clients))
    seconds = []
    for repeat in range(3):
        config = SecAggConfig(run_id="bench", round=repeat, clients=names, length=length)
        machines = {n: SecAggClient(n, config, values=rng.normal(size=length), weight=1000) for n in names}
        start = time.perf_counter()
        run_in_memory(SecAggServer(config), machines)
        seconds.append(time.perf_counter() - start)
    frame = encode_frame(MaskedInput(round=0, attempt=0, values=np.zeros(length + 1, np.int64)),
                         session=b"s" * 16, seq=0)
    return {"seconds": round(statistics.median(seconds), 4), "masked_input_bytes": len(frame),
            "float32_update_bytes": 4 * length}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    result = {
        "skew": skew(),
        "mnist1d_generate_s": mnist1d_seconds(),
        "secure_agg": {f"{n}x{d}": secure_agg(n, d) for n, d in ((3, 10_000), (5, 10_000), (5, 100_000))},
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
