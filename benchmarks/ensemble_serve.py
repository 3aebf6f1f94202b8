"""What the split ensemble costs at serving: its latency beside the bag of networks and the trees alone, one run.

    python benchmarks/ensemble_serve.py [--quick] [--single 1000] [--seconds 8] [--concurrency 8] \
        [--out benchmarks/results-ensemble-serve.json]

On the bundled ``bank_marketing_no_duration`` preset (the ``make demo`` data: the bank holds the profile and the
label, the partner the campaign's calls), three models are trained in this process (both nodes over memory channels)
and batch-predicted on the bank's test table: ``bag`` (``train.networks = 5``, the recipe's networks, the quality
benchmark's bag), ``trees`` (``[model] kind = "boosting"``: ``TREES`` trees of depth 5, learning rate 0.3, 32 bins,
GOSS 0.2 / 0.1, a 2048-bit OU key, as benchmarks/boosting_serve.py) and ``ensemble`` (``[model] kind = "ensemble"``:
those 5 networks and those trees, the weight chosen on 10 % of the bank's rows, no refit). Latency does not depend
on how long a model trained, so the networks train ``EPOCHS`` epochs. Each model is then served as in production:
``vsplit serve`` for the partner (its daemon) and the bank (HTTP on 127.0.0.1) as separate OS processes over mutual
TLS on loopback, loaded with benchmarks/serving.py's client in this process, live and then cached
(:func:`boosting_serve.live_then_cached`). All processes share the machine's cores.

Prints one JSON object (and writes it to ``--out``): per model, ``live`` and ``cached`` (``p50_ms``, ``p99_ms`` of one
request at a time, ``load``: ``--concurrency`` clients for ``--seconds``, ``max_abs_diff_vs_batch``: served against
``vsplit predict``; ``reasons``: 100 requests one at a time asking 3 reason codes of applicants the split scores,
where the model gives them, :data:`REASONS`, and their p50 over a plain score's), ``train_seconds`` and
``answer_width`` (floats a partner answers per customer); ``ratios``: the
ensemble's p50 and p99 over the bag's and over the trees' (live and cached, within this run); ``load_average`` at the
start and the end. ``--quick``: 1 epoch, 8 trees, 200 single requests, 2 s of load (a smoke run, not the figures).
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

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from boosting_serve import live_then_cached, request_rows, train_and_predict  # benchmarks/ is on the path (above)

REPO = Path(__file__).resolve().parents[1]
PRESET, NETWORKS, EPOCHS, TREES, DEPTH = "bank_marketing_no_duration", 5, 4, 40, 5
MODELS = ("bag", "trees", "ensemble")
#: the reason codes asked per request, live and cached, of each model: a plain bag gives none (its score is the mean of
#: its networks' probabilities); the trees' come from the bits that scored the applicant, so cached mode gives them
#: too; the ensemble's explain each network with the partner, live only
REASONS = {"bag": (0, 0), "trees": (3, 3), "ensemble": (3, 0)}
RESULTS = REPO / "benchmarks" / "results-ensemble-serve.json"


def model_sets(model: str, *, epochs: int, trees: int) -> list[str]:
    """The overrides that make the parties' configs train ``model``."""
    boosting = [f"boosting.trees={trees}", f"boosting.max_depth={DEPTH}", "boosting.learning_rate=0.3",
                "boosting.max_bins=32", "boosting.key_bits=2048", "boosting.goss_top_rate=0.2",
                "boosting.goss_other_rate=0.1"]
    if model == "bag":
        return [f"train.networks={NETWORKS}", f"train.epochs={epochs}"]
    if model == "trees":
        return ["model.kind=boosting", *boosting]
    return ["model.kind=ensemble", f"ensemble.networks={NETWORKS}", "ensemble.refit=false", f"train.epochs={epochs}",
            *boosting]


def prepare(root: Path, model: str, *, http: int, link: int, epochs: int, trees: int) -> list[str]:
    """The preset's bank and partner folders under ``root``; the overrides every command of ``model``'s run takes."""
    from vsplit.datasets import preset
    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.orchestrate import VERTICAL, pilot_data
    from vsplit.pilot.prepare import ensure_keys, export_tables

    data = preset(PRESET, seed=0)
    write_missing_configs(root / "parties", label=data.label, positive_label=data.positive_label, kind="vertical",
                          roles=dict(VERTICAL))
    export_tables(pilot_data(data, "vertical"), root / "parties")
    ensure_keys(root / "parties", list(VERTICAL))
    return [f"output.run_id=serve-{model}", f"output.dir={json.dumps(str(root / 'runs'))}", "train.seed=0",
            *model_sets(model, epochs=epochs, trees=trees), f"serve.address=127.0.0.1:{link}",
            f"serve.http=127.0.0.1:{http}", "serve.timeout_ms=2000"]


def split_diff(served: pd.DataFrame, batch: pd.DataFrame) -> float:
    """The largest difference of a customer's served split score and its batch score; the customers the split
    scores must be the ones ``vsplit predict`` scored (a bag also answers the others with its bank-only model)."""
    both = served.merge(batch, left_on="id", right_on="customer_id", validate="one_to_one")
    split = both["model_x"] == "split"
    if len(both) != len(batch) or not (split == (both["status"] == "scored")).all():
        raise AssertionError(f"served {len(served)} rows, batch {len(batch)}, matched {len(both)}; batch status "
                             f"{batch['status'].value_counts().to_dict()}; served models "
                             f"{served['model'].value_counts(dropna=False).to_dict()}")
    return float((both.loc[split, "score"] - both.loc[split, "probability"]).abs().max())


def one_model(model: str, *, epochs: int, trees: int, single_n: int, seconds: float,
              concurrency: int, reasons_n: int = 100) -> dict[str, Any]:
    """Train ``model``, serve it live then cached, measure."""
    from vsplit.transport.ports import free_ports

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"vsplit-ensemble-serve-{model}-") as tmp:
        root = Path(tmp)
        http, link = free_ports(2)
        sets = prepare(root, model, http=http, link=link, epochs=epochs, trees=trees)
        began = time.perf_counter()
        batch = train_and_predict(root, sets)
        out["train_seconds"] = round(time.perf_counter() - began, 1)
        rows = request_rows(root)
        out.update(live_then_cached(root, sets, f"http://127.0.0.1:{http}", rows, batch, single_n=single_n,
                                    seconds=seconds, concurrency=concurrency, diff_of=split_diff,
                                    reasons=REASONS[model], reasons_n=reasons_n))
        out["answer_width"] = answer_width(root, sets)
        out["rows_scored"] = len(rows)
    return out


def answer_width(root: Path, sets: list[str]) -> int:
    """Floats the partner answers per customer (its serving model's width)."""
    from vsplit.config import load_config
    from vsplit.serve.model import PartnerModel

    config = load_config(root / "parties" / "partner" / "party.toml", overrides=sets)
    return int(PartnerModel.load(config).width)


def run(quick: bool = False, *, single_n: int | None = None, seconds: float | None = None,
        concurrency: int = 8) -> dict[str, Any]:
    """Every model of :data:`MODELS` in turn; the figures (see the module docstring)."""
    epochs, trees = (1, 8) if quick else (EPOCHS, TREES)
    single_n = single_n or (200 if quick else 1000)
    seconds = seconds or (2.0 if quick else 8.0)
    result: dict[str, Any] = {"load_average": {"start": [round(v, 2) for v in os.getloadavg()]},
                              "cpus": os.cpu_count()}
    for model in MODELS:
        result[model] = one_model(model, epochs=epochs, trees=trees, single_n=single_n, seconds=seconds,
                                  concurrency=concurrency, reasons_n=20 if quick else 100)
    result["ratios"] = {f"ensemble_over_{other}": {f"{mode}_{k}": round(result["ensemble"][mode][k]
                                                                        / result[other][mode][k], 2)
                                                   for mode in ("live", "cached") for k in ("p50_ms", "p99_ms")}
                        for other in ("bag", "trees")}
    result["load_average"]["end"] = [round(v, 2) for v in os.getloadavg()]
    result["settings"] = {"quick": quick, "preset": PRESET, "networks": NETWORKS, "epochs": epochs, "trees": trees,
                          "depth": DEPTH, "key_bits": 2048, "goss": [0.2, 0.1], "single_requests": single_n,
                          "load_seconds": seconds, "concurrency": concurrency, "reasons": REASONS,
                          "reasons_requests": 20 if quick else 100,
                          "client": "benchmarks/http_client.py (benchmarks/serving.py's load generator), in the "
                                    "benchmark's process"}
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--single", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here (atomically)")
    args = parser.parse_args(argv)
    result = run(args.quick, single_n=args.single, seconds=args.seconds, concurrency=args.concurrency)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        from vsplit.atomic import write_atomic

        write_atomic(args.out, (text + "\n").encode())
    return result


if __name__ == "__main__":
    main()
