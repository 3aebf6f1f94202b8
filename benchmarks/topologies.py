"""Every topology on the same engine: quality against the same network placed on one party, traffic, and speed.

Prints one JSON object keyed by topology (``vertical``, ``vanilla``, ``u_shaped``), each with:
  preset               the bundled data (vertical: bank_marketing; vanilla, u_shaped: default_credit laid out as the
                       vanilla-credit and u-shaped-credit pilots do)
  metric               the test metric's name (auc)
  split                test metric of split training (in one process, every frame through the codec)
  placed_on_one_party  test metric of the same topology placed on the label party (no cut); must agree within 0.002
  bytes_per_epoch      encoded bytes each party sent per training epoch (training and validation frames)
  epoch_s              seconds per training epoch: ``inprocess`` (all parties in this process) and ``tls`` (one OS
                       process per party over mutual TLS on 127.0.0.1), same seeds, one torch thread per party,
                       no validation rows, medians of epochs 2..
and ``u_shaped_digits``: the image case (scikit-learn's 8x8 digits, an ImageHead client segment, multiclass
accuracy), in one process only (segments of your own are a Python API, not a config setting).

Run: .venv/bin/python benchmarks/topologies.py [--epochs 20] [--timing-epochs 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.evaluation import shared_test_views
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.orchestrate import VERTICAL, free_port, pilot_data
from vsplit.pilot.prepare import ensure_keys, export_tables
from vsplit.runtime.progress import EpochClock

CASES = {
    "vertical": ("bank_marketing", VERTICAL),
    "vanilla": ("default_credit", VERTICAL),
    "u_shaped": ("default_credit", {"bank": "label", "cloud": "compute"}),
}


def estimator(kind: str, data: Any, **settings: Any) -> SplitClassifier:
    return SplitClassifier(label_party="bank", label=data.label, positive_label=data.positive_label, random_state=0,
                           topology=kind, server="cloud", **settings)


def quality(kind: str, data: Any, tables: Any, epochs: int) -> dict[str, Any]:
    test = shared_test_views(tables.test, label_party="bank", id_column=data.id_column)
    split = estimator(kind, data, epochs=epochs).fit(tables.train)
    placed = estimator(kind, data, epochs=epochs, mode="centralized").fit(tables.train)
    trained = len(split.history_)
    sent = {p: round(pump.stats.total("sent") / trained) for p, pump in split.pumps_.items()}
    return {"metric": "auc", "split": round(split.evaluate(test)["auc"], 4),
            "placed_on_one_party": round(placed.evaluate(test)["auc"], 4), "bytes_per_epoch": sent,
            "epochs_trained": trained}


def tls_epochs(kind: str, data: Any, tables: Any, roles: dict[str, str], epochs: int) -> list[float]:
    settings = [f"train.epochs={epochs}", "train.validation_fraction=0.0",
                "output.baselines=false", 'data.test_path=""', "output.run_id=bench"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        export_tables(tables, root)
        ensure_keys(root, list(roles))
        configs = write_missing_configs(root, label=data.label, positive_label=data.positive_label, kind=kind,
                                        roles=roles)
        hub = next(p for p, r in roles.items() if r == ("compute" if kind == "u_shaped" else "label"))
        port = free_port()
        procs = []
        for party, path in configs.items():
            address = f"network.listen=127.0.0.1:{port}" if party == hub else f"network.dial=127.0.0.1:{port}"
            extra = [s for s in settings if roles[party] != "compute" or not s.startswith("data.")]
            args = [sys.executable, "-m", "vsplit.cli.main", "train", "--config", str(path), "--quiet",
                    "--set", address, *[x for s in extra for x in ("--set", s)]]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          env=dict(os.environ, PYTHONUNBUFFERED="1")))
        for proc in procs:
            _, err = proc.communicate(timeout=1800)
            if proc.returncode:
                raise RuntimeError(f"party process failed: {err.decode()[-2000:]}")
        result = json.loads((root / "runs" / "bench" / "bank" / "result.json").read_text())
    return result["epoch_seconds"][1:]


def inprocess_epochs(kind: str, data: Any, tables: Any, epochs: int) -> list[float]:
    clock = EpochClock()
    estimator(kind, data, epochs=epochs, validation_fraction=0.0, patience=None, alignment="join",
              callbacks=[clock]).fit(tables.train)
    return clock.seconds[1:]


def digits_case(epochs: int) -> dict[str, Any]:
    from vsplit.models.segments import ImageHead

    data = preset("digits", seed=0)
    out: dict[str, Any] = {"preset": "digits", "metric": "accuracy"}
    for mode, key in (("split", "split"), ("centralized", "placed_on_one_party")):
        torch.manual_seed(0)
        clf = SplitClassifier(label_party="client", label="digit", task="multiclass", topology="u_shaped",
                              mode=mode, epochs=epochs, batch_size=64, embedding_width=256, scaling="standard",
                              segments={"head": ImageHead()}, random_state=0).fit(data.train)
        out[key] = round(clf.evaluate(data.test)["accuracy"], 4)
        if mode == "split":
            out["bytes_per_epoch"] = {p: round(pump.stats.total("sent") / len(clf.history_))
                                      for p, pump in clf.pumps_.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=20, help="epochs (with early stopping) for the metrics")
    parser.add_argument("--timing-epochs", type=int, default=6, help="epochs timed, the first not counted")
    parser.add_argument("--only", choices=sorted(CASES), action="append", help="run only these topologies")
    args = parser.parse_args(argv)
    began, load = time.perf_counter(), os.getloadavg()[0]
    out: dict[str, Any] = {}
    threads = torch.get_num_threads()
    for kind in args.only or list(CASES):
        name, roles = CASES[kind]
        data = preset(name, seed=0)
        tables = pilot_data(data, kind)
        torch.set_num_threads(1)
        try:
            row: dict[str, Any] = {"preset": name, **quality(kind, data, tables, args.epochs)}
            inproc = inprocess_epochs(kind, data, tables, args.timing_epochs)
        finally:
            torch.set_num_threads(threads)
        tls = tls_epochs(kind, data, tables, roles, args.timing_epochs)
        row["epoch_s"] = {"inprocess": round(statistics.median(inproc), 4), "tls": round(statistics.median(tls), 4)}
        row["agree"] = abs(row["split"] - row["placed_on_one_party"]) <= 0.002
        out[kind] = row
    if not args.only:
        torch.set_num_threads(1)
        try:
            out["u_shaped_digits"] = digits_case(args.epochs)
        finally:
            torch.set_num_threads(threads)
    out["load_average_before"] = round(load, 2)
    out["seconds"] = round(time.perf_counter() - began, 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
