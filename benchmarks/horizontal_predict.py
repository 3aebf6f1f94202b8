"""Scoring with a trained horizontal split: a bank's customers through its segments and the server's, over mutual TLS.

    python benchmarks/horizontal_predict.py [--rows 100000] [--segments vanilla|u_shaped] [--out FILE]

Trains the pilot's set-up in one process (default credit dealt to 3 banks, SplitFed v1, 2 rounds: the speed of
scoring does not depend on how well the model learned), then runs ``vsplit predict`` for the server and for bank_1
as two OS processes over mutual TLS, on a table of ``--rows`` customers (bank_1's training rows repeated, with new
IDs). Prints one JSON object: the wall seconds of both ``vsplit predict`` processes (start-up included), the
bank's ``predict.json`` seconds (``load_and_prepare``: its model and the table read and preprocessed; ``score``: its
segments, the exchange with the server and its head; ``total``, with writing ``predictions.csv``), rows per second
on ``total`` and on ``score``, bytes the bank sent and received per row, and the forward passes alone in this one
process with both saved parts put together on the same prepared rows (``in_process_forward_s``, and ``score``'s
ratio to it), the largest difference between the two's probabilities, and the load average at the start and the
end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readmit import start_party


def run(root: Path, *, rows: int, segments: str) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    from vsplit.config import load_config, resolve
    from vsplit.node.horizontal import HorizontalNode, run_in_process
    from vsplit.pilot.horizontal import prepare_horizontal

    configs = prepare_horizontal(root, banks=3, run_id="predict-bench", schedule={"kind": "splitfed_v1"},
                                 train={"epochs": 2, "batch_size": 256}, segments=segments)
    run_in_process([HorizontalNode(load_config(p), progress=False) for p in configs.values()])
    bank = load_config(configs["bank_1"])
    d = bank.data
    train = pd.read_parquet(resolve(bank, d.path))
    table = pd.concat([train] * (rows // len(train) + 1), ignore_index=True).iloc[:rows].copy()
    table[d.id_column] = [f"new-{i:08d}" for i in range(rows)]
    path = root / "new_customers.parquet"
    table.to_parquet(path)
    logs = {p: root / f"{p}.predict.log" for p in ("server", "bank_1")}
    started = time.perf_counter()
    job = ["--job", "bench", "--quiet"]
    procs = {"server": start_party(["predict", "--config", str(configs["server"]), "--banks", "bank_1", *job],
                                   logs["server"]),
             "bank_1": start_party(["predict", "--config", str(configs["bank_1"]), "--input", str(path), *job],
                                   logs["bank_1"])}
    for party, proc in procs.items():
        if proc.wait(timeout=1800) != 0:
            raise SystemExit(f"{party} failed:\n{logs[party].read_text()[-2000:]}")
    wall = time.perf_counter() - started
    node = HorizontalNode(bank, progress=False)
    summary = json.loads((node.folder / "predictions" / "bench" / "predict.json").read_text())
    comm = summary["communication"]["by_peer"]["server"]
    # the forward passes alone in one process, on the same prepared rows, with both saved parts put together
    import torch

    from vsplit.node.horizontal import BATCH_ROWS

    server = HorizontalNode(load_config(configs["server"]), progress=False)
    node.load_model()
    server.load_model()
    assert node.party is not None
    _, inputs = node.party.prepare(table)
    source, top, after = node.parts()
    modules = {**node.modules, **server.modules}
    began = time.perf_counter()
    with torch.no_grad():
        outputs = []
        for i in range(0, rows, BATCH_ROWS):
            x = modules[source](*(t[i:i + BATCH_ROWS] for t in inputs))
            for name in top + after:
                x = modules[name](x)
            outputs.append(x)
        proba = node.task.predict(torch.cat(outputs))
    in_process = time.perf_counter() - began
    got = pd.read_csv(node.folder / "predictions" / "bench" / "predictions.csv")["probability"].to_numpy()
    seconds = summary["seconds"]
    return {"rows": rows, "segments": segments, "wall_s_with_startup": round(wall, 2), "predict_seconds": seconds,
            "rows_per_s_total": round(rows / seconds["total"]), "rows_per_s_score": round(rows / seconds["score"]),
            "bytes_sent_per_row": round(comm["sent"] / rows, 1),
            "bytes_received_per_row": round(comm["received"] / rows, 1),
            "in_process_forward_s": round(in_process, 4),
            "score_over_in_process_forward": round(seconds["score"] / in_process, 2),
            "max_abs_diff_vs_in_process": float(np.max(np.abs(got - proba)))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--segments", choices=["vanilla", "u_shaped"], default="vanilla")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"load_average_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="vsplit-predict-") as tmp:
        result.update(run(Path(tmp), rows=args.rows, segments=args.segments))
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        from vsplit.atomic import write_atomic

        write_atomic(args.out, (text + "\n").encode())


if __name__ == "__main__":
    main()
