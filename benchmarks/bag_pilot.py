"""What a bag of networks (``[train] networks``) costs in the pilot form: training time and cut bytes, against one.

    python benchmarks/bag_pilot.py [--rows 8000] [--epochs 3] [--networks 5] [--out benchmarks/results-bag-pilot.json]

The bank and its partner of the bank_marketing preset (its first ``--rows`` training customers) run the pilot's node
code (``PartyNode``, what ``vsplit train`` runs) in two threads of this process, over memory channels and the real
codec, with the default recipe for a fixed ``--epochs`` (no early stopping, so every network runs as many epochs and
the bytes compare exactly): once with ``networks = 1``, once with ``--networks`` (after a one-epoch warm-up run that
is not counted: the first fit in a process also pays for PyTorch's first calls). Over mutual TLS the frames are the
same; only the TLS records around them add bytes.

Prints one JSON object (and writes ``--out``): per run, the training stage's wall time at the bank
(``train_seconds``), the bytes each party sent in training (PSI excluded: it runs once, whatever the bag) in total and
per shared row and epoch, by message type; and ``ratios``: the bag's over one network's (time, partner bytes, bank
bytes). ``load_average`` at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from vsplit.config import load_config
from vsplit.datasets import preset
from vsplit.node import PartyNode
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.prepare import export_tables
from vsplit.transport.memory import memory_pair

#: message types of PSI: sent once per run, whatever the number of networks
PSI = {"Hello", "Blinded", "Doubled", "Selected"}


def first_rows(data: Any, rows: int) -> Any:
    """The preset's first ``rows`` training customers of the bank, and the partner's rows of them."""
    ids = set(data.train["bank"]["customer_id"].head(rows))
    return {"train": {p: t[t["customer_id"].isin(ids)].reset_index(drop=True) for p, t in data.train.items()},
            "test": data.test}


def train(root: Path, *, networks: int, epochs: int) -> dict[str, Any]:
    """One pilot run of ``networks`` networks; its time and traffic."""
    sets = [f"train.networks={networks}", f"train.epochs={epochs}", "train.patience=1000", 'data.test_path=""',
            "output.baselines=false", f"output.run_id=bag-{networks}"]
    nodes = {p: PartyNode(load_config(root / p / "party.toml", overrides=sets, check_files=False), progress=False)
             for p in ("bank", "partner")}
    bank_end, partner_end = memory_pair()
    results: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: results.update(partner=nodes["partner"].run({"bank": partner_end})))
    worker.start()
    results["bank"] = nodes["bank"].run({"partner": bank_end})
    worker.join()
    shared = results["bank"].psi["train"]["intersection"]
    out: dict[str, Any] = {"networks": networks, "shared_rows": shared,
                           "train_seconds": results["bank"].seconds["train"]}
    for party, result in results.items():
        sent = {k: v for k, v in result.comm["sent"].items() if k not in PSI}
        total = sum(item["bytes"] for item in sent.values())
        out[party] = {"bytes_sent": total, "bytes_per_row_epoch": round(total / (shared * epochs), 2),
                      "by_type": {k: v["bytes"] for k, v in sorted(sent.items())}}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--networks", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results-bag-pilot.json"))
    args = parser.parse_args(argv)
    start = [round(v, 2) for v in os.getloadavg()]
    data = preset("bank_marketing", seed=0)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write_missing_configs(root, label=data.label, positive_label=data.positive_label)
        export_tables(first_rows(data, args.rows), root)
        train(root, networks=1, epochs=1)  # warm-up: the first fit in a process pays for torch's first calls
        one = train(root, networks=1, epochs=args.epochs)
        bag = train(root, networks=args.networks, epochs=args.epochs)
    result = {
        "rows": args.rows, "epochs": args.epochs, "one": one, "bag": bag,
        "ratios": {"train_seconds": round(bag["train_seconds"] / one["train_seconds"], 3),
                   "partner_bytes": round(bag["partner"]["bytes_sent"] / one["partner"]["bytes_sent"], 4),
                   "bank_bytes": round(bag["bank"]["bytes_sent"] / one["bank"]["bytes_sent"], 4)},
        "load_average": {"start": start, "end": [round(v, 2) for v in os.getloadavg()]},
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
