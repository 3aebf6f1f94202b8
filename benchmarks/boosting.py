"""Issue 46's figures: vertical boosting on bank-full (the `bank_marketing` preset); prints one JSON object.

    python benchmarks/boosting.py [--trees 100] [--depth 5] [--learning-rate 0.3] [--early-stopping 5]
                                  [--goss 0.2 0.1] [--key-bits 2048] [--workers 1] [--compare-workers 2]
                                  [--out benchmarks/results-boosting.json]

The preset splits bank-full's columns between the bank (profile and label) and the partner (the campaign's calls);
the aligned customers (both parties' training rows) are split 80/20 into training and validation rows by a seeded
draw, the test rows are those both parties have in the preset's test split. Each party bins its own columns on its
own rows (32 bins, categories as bins). ``bank_full``: the bank's and the partner's machines run in this one process
over the in-process runner's memory channels (``mode: one_process``), so the two parties' work adds up, as it does
between two processes that wait on each other; the wire is the in-process codec, not TLS. ``--workers N`` hands the
ciphertext work (the bank's encryption, the partner's sums) to N worker processes (:mod:`vsplit.boosting.backend`).
``two_processes``: the same settings as two ``vsplit train`` processes over mutual TLS (``[model] kind =
"boosting"``, PSI first, the node's own validation draw and early stopping, GOSS through ``boosting.goss_top_rate``
and ``goss_other_rate``).

Early stopping is read off the one run of ``--trees`` trees: after each tree the validation log-loss of the trees so
far; the run stops after ``--early-stopping`` trees without a better one, keeping the best. ``seconds`` is the wall
time at which the run had finished the trees such a run trains (each tree's finish is timed), so one run gives both
``seconds`` and ``seconds_100_trees``; an early-stopped run would add one prediction round per tree on the validation
rows (milliseconds, not counted).

  bank_full.seconds / trees / seconds_per_tree   early-stopped run: wall time, trees trained, their mean
  bank_full.cpu_seconds                          this process's CPU time over those trees (wall time beyond it: waiting
                                                 for a core on the shared machine)
  bank_full.seconds_100_trees                    the same run to --trees trees
  bank_full.auc / pooled_auc                     test AUC of the split trees and of fit_pooled (same bins, params)
  bank_full.same_trees                           the split trees equal the pooled ones (splits; leaves within 1e-6)
  bank_full.split_s                              encryption, partner histograms (sums and packing), decryption, and
                                                 the rest (the wire, the bank's plaintext sums, the partner's key
                                                 set-up), summed over the early-stopped run's trees
  bank_full.bytes_per_tree                       encoded frames each way, per tree
  xgboost.*                                      pooled XGBoost, same parameters and early stopping, same run
  bank_full.workers_check                        the first 5 trees again with the ciphertext work spread over
                                                 --compare-workers processes (vsplit.boosting.backend), beside the
                                                 same trees of the run above
  ratio_to_pooled_xgboost                        bank_full.seconds / xgboost.seconds
  two_processes.*                                `vsplit train` as two processes: training seconds (PSI apart),
                                                 trees, test AUC, bytes per tree, the whole commands' wall time
  load_average                                   os.getloadavg() at the start and the end (the machine is shared)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import vsplit.boosting.label as label_module
import vsplit.boosting.partner as partner_module
from vsplit.boosting import BoostModel, BoostParams, LabelBoost, PartnerBoost, fit_bins, fit_pooled
from vsplit.boosting.backend import ProcessBackend, SerialBackend
from vsplit.datasets import preset
from vsplit.he import generate_keypair
from vsplit.runtime.inprocess import connect, run_machines

BINS = 32
try:
    from benchmarks.boosting_core import timed
except ImportError:  # run as a script from benchmarks/
    from boosting_core import timed  # type: ignore[no-redef]


def tables(seed: int) -> dict[str, Any]:
    """Aligned training, validation and test rows of both parties (categories as numbers), and the labels."""
    data = preset("bank_marketing", seed=seed)
    idc, label = data.id_column, data.label

    def numeric(frame: pd.DataFrame, party: str, categories: dict[str, list]) -> np.ndarray:
        out = frame.drop(columns=[idc] + ([label] if label in frame else [])).copy()
        for column in data.categorical.get(party, []):
            out[column] = pd.Categorical(out[column], categories=categories[column]).codes.astype(float)
            out.loc[out[column] < 0, column] = np.nan
        return out.to_numpy(dtype=np.float64)

    split: dict[str, Any] = {}
    for part, views in (("train", data.train), ("test", data.test)):
        ids = sorted(set(views["bank"][idc]) & set(views["partner"][idc]))
        split[part] = {p: views[p].set_index(idc).loc[ids].reset_index() for p in ("bank", "partner")}
    categories = {c: sorted(data.train[p][c].dropna().unique().tolist())
                  for p in ("bank", "partner") for c in data.categorical.get(p, [])}
    out: dict[str, Any] = {"categorical": {}}
    for part in ("train", "test"):
        bank, partner = split[part]["bank"], split[part]["partner"]
        out[part] = {"bank": numeric(bank, "bank", categories), "partner": numeric(partner, "partner", categories),
                     "y": (bank[label] == data.positive_label).to_numpy(dtype=np.float64)}
    for p in ("bank", "partner"):
        columns = [c for c in split["train"][p].columns if c not in (idc, label)]
        out["categorical"][p] = tuple(columns.index(c) for c in data.categorical.get(p, []))
        out[p + "_columns"] = columns
    rng = np.random.default_rng(seed)
    valid = rng.random(len(out["train"]["y"])) < 0.2
    out["valid"] = {k: v[valid] for k, v in out["train"].items()}
    out["train"] = {k: v[~valid] for k, v in out["train"].items()}
    return out


def staged_margins(model: BoostModel, *, own: np.ndarray, decisions: dict[int, np.ndarray]) -> np.ndarray:
    """``(trees, rows)``: the margin after each tree."""
    steps = [BoostModel(trees=(t,), base=0.0, widths=model.widths).margins(own_codes=own, decisions=decisions)
             for t in model.trees]
    return model.base + np.cumsum(steps, axis=0)


def logloss(y: np.ndarray, margin: np.ndarray) -> float:
    return float(np.mean(np.logaddexp(0, margin) - y * margin))


def stop_at(losses: list[float], rounds: int) -> int:
    """Trees an early-stopped run trains: it stops ``rounds`` trees after the best (or at the end)."""
    for k in range(len(losses)):
        if k - int(np.argmin(losses[: k + 1])) >= rounds:
            return k + 1
    return len(losses)


def auc(y: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(y, score)), 5)


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = tables(args.seed)
    tr, va, te = data["train"], data["valid"], data["test"]
    bins = {p: fit_bins(tr[p], categorical=data["categorical"][p], max_bins=BINS) for p in ("bank", "partner")}
    codes = {part: {p: bins[p].transform(d[p]) for p in ("bank", "partner")} for part, d in
             (("train", tr), ("valid", va), ("test", te))}
    top, other = args.goss
    params = BoostParams(trees=args.trees, max_depth=args.depth, learning_rate=args.learning_rate,
                         goss_top_rate=top, goss_other_rate=other, seed=args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test-only flag warns below 2048 bits
        keys = generate_keypair(key_bits=args.key_bits, insecure_small_key_for_tests=args.key_bits < 2048)
    seconds: Counter = Counter()
    finished: list[tuple[float, Counter]] = []  # per tree: when it was finished, and the phases' seconds so far
    original_finish = label_module.LabelBoost._finish_tree

    def finish(self: LabelBoost) -> Any:
        finished.append((time.perf_counter(), seconds + Counter(cpu=time.process_time())))
        return original_finish(self)

    label_module.LabelBoost._finish_tree = finish  # type: ignore[method-assign]
    backend = ProcessBackend(workers=args.workers) if args.workers > 1 else SerialBackend()
    undo = [timed(backend, "encrypt", seconds, "encryption"),
            timed(label_module, "decrypt_sums", seconds, "decryption"),
            timed(partner_module.PartnerBoost, "_level_sums", seconds, "partner_histograms"),
            lambda: setattr(label_module.LabelBoost, "_finish_tree", original_finish), backend.close]
    sent: Counter = Counter()

    def tap(sender: str, recipient: str, message: Any, frame: bytes) -> None:
        sent["to_partner" if sender == "bank" else "to_bank"] += len(frame)

    machines = {"bank": LabelBoost(codes["train"]["bank"], width=BINS + 1, labels=tr["y"], partners=["partner"],
                                   params=params, keys=keys, backend=backend),
                "partner": PartnerBoost(codes["train"]["partner"], width=BINS + 1, min_key_bits=args.key_bits,
                                        insecure_small_key_for_tests=args.key_bits < 2048, backend=backend)}
    start, cpu = time.perf_counter(), time.process_time()
    try:
        results = run_machines(connect(["bank", "partner"], session=os.urandom(16), taps=[tap]), machines)
    finally:
        for u in undo:
            u()
    total = time.perf_counter() - start
    model, partner_model = results["bank"], results["partner"]
    pooled = fit_pooled([codes["train"]["bank"], codes["train"]["partner"]], tr["y"], widths=[BINS + 1] * 2,
                        params=params)
    same = all({n: s.key() for n, s in a.splits.items()} == {n: s.key() for n, s in b.splits.items()}
               and max(abs(a.leaves[n] - b.leaves[n]) for n in a.leaves) <= 1e-6
               for a, b in zip(model.trees, pooled.trees, strict=True))
    margins = {part: staged_margins(model, own=codes[part]["bank"],
                                    decisions={1: partner_model.decisions(codes[part]["partner"])})
               for part in ("valid", "test")}
    losses = [logloss(va["y"], m) for m in margins["valid"]]
    kept = stop_at(losses, args.early_stopping)
    best = int(np.argmin(losses[:kept]))
    pooled_decisions = {1: _pooled_bits(pooled, codes["test"]["partner"])}
    pooled_test = staged_margins(pooled, own=codes["test"]["bank"], decisions=pooled_decisions)
    trees_run = len(model.trees)
    seconds_es = finished[kept - 1][0] - start
    split_s = {k: round(v, 2) for k, v in sorted(finished[kept - 1][1].items()) if k != "cpu"}
    cpu_es = finished[kept - 1][1]["cpu"] - cpu
    split_s["wire_and_rest"] = round(seconds_es - sum(split_s.values()), 2)
    bank_full = {
        "mode": "one_process",
        "seconds": round(seconds_es, 2), "trees": kept, "best_tree": best + 1,
        "seconds_per_tree": round(seconds_es / kept, 3),
        "cpu_seconds": round(cpu_es, 2),
        f"seconds_{trees_run}_trees": round(total, 2),
        "auc": auc(te["y"], margins["test"][best]), "pooled_auc": auc(te["y"], pooled_test[best]),
        "same_trees": bool(same),
        "rows": {"train": len(tr["y"]), "valid": len(va["y"]), "test": len(te["y"])},
        "columns": {"bank": data["bank_columns"], "partner": data["partner_columns"]},
        "split_s": split_s,
        "bytes_per_tree": {k: v // trees_run for k, v in sorted(sent.items())},
    }
    if args.compare_workers > 1:  # the first trees again, with the ciphertext work over worker processes
        short = dataclasses.replace(params, trees=min(5, trees_run))
        with ProcessBackend(workers=args.compare_workers) as pool:
            pool.encrypt(keys.public, np.zeros((pool.min_split, 2)), packing=machines["bank"].packing)  # warm up
            again = {"bank": LabelBoost(codes["train"]["bank"], width=BINS + 1, labels=tr["y"], partners=["partner"],
                                        params=short, keys=keys, backend=pool),
                     "partner": PartnerBoost(codes["train"]["partner"], width=BINS + 1, min_key_bits=args.key_bits,
                                             insecure_small_key_for_tests=args.key_bits < 2048, backend=pool)}
            begin = time.perf_counter()
            run_machines(connect(["bank", "partner"], session=os.urandom(16)), again)
            spread = time.perf_counter() - begin
        bank_full["workers_check"] = {"trees": short.trees, "workers": args.compare_workers,
                                      "seconds_in_one_process": round(finished[short.trees - 1][0] - start, 2),
                                      "seconds_with_workers": round(spread, 2)}
    xgb = pooled_xgboost(data, args)
    return {"settings": {"depth": args.depth, "learning_rate": args.learning_rate, "max_trees": args.trees,
                         "early_stopping_rounds": args.early_stopping, "bins": BINS, "goss": list(args.goss),
                         "scheme": "ou", "key_bits": args.key_bits, "seed": args.seed, "workers": args.workers,
                         "early_stopping_metric": "validation log-loss"},
            "bank_full": bank_full, "xgboost": xgb,
            "ratio_to_pooled_xgboost": round(seconds_es / xgb["seconds"], 1)}


def _pooled_bits(pooled: BoostModel, partner_codes: np.ndarray) -> np.ndarray:
    """The pooled model's partner bits by record id (fit_pooled numbers them as a partner would)."""
    splits = sorted((s.record, s) for t in pooled.trees for s in t.splits.values() if s.party == 1)
    from vsplit.boosting.gains import goes_left

    bits = np.zeros((len(partner_codes), len(splits)), dtype=np.uint8)
    for record, s in splits:
        bits[:, record] = goes_left(partner_codes[:, s.column], bin=s.bin, missing_left=s.missing_left,
                                    width=BINS + 1)
    return bits


def pooled_xgboost(data: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """XGBoost on the pooled raw columns: same depth, rate, trees, bins and early stopping; both cores."""
    import xgboost

    def pooled(part: dict[str, np.ndarray]) -> np.ndarray:
        return np.hstack([part["bank"], part["partner"]])

    model = xgboost.XGBClassifier(n_estimators=args.trees, max_depth=args.depth, learning_rate=args.learning_rate,
                                  max_bin=BINS, tree_method="hist", reg_lambda=1.0, min_child_weight=1.0,
                                  early_stopping_rounds=args.early_stopping, eval_metric="logloss", n_jobs=2,
                                  random_state=args.seed)
    start = time.perf_counter()
    model.fit(pooled(data["train"]), data["train"]["y"], eval_set=[(pooled(data["valid"]), data["valid"]["y"])],
              verbose=False)
    seconds = time.perf_counter() - start
    score = model.predict_proba(pooled(data["test"]))[:, 1]
    return {"seconds": round(seconds, 3), "trees": int(model.best_iteration) + 1, "auc": auc(data["test"]["y"], score),
            "version": xgboost.__version__}


def two_processes(args: argparse.Namespace) -> dict[str, Any]:
    """The bank and the partner as two `vsplit train` processes over mutual TLS (``[model] kind = "boosting"``),
    PSI included, in a temporary folder; the bank's result.json gives the figures."""
    import tempfile

    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.orchestrate import VERTICAL, pilot_data
    from vsplit.pilot.prepare import ensure_keys, export_tables
    from vsplit.pilot.processes import start, wait
    from vsplit.transport.ports import free_ports

    data = preset("bank_marketing", seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="vsplit-boosting-") as tmp:
        root = Path(tmp)
        configs = write_missing_configs(root / "parties", label=data.label, positive_label=data.positive_label,
                                        kind="vertical", roles=dict(VERTICAL))
        export_tables(pilot_data(data, "vertical"), root / "parties")
        ensure_keys(root / "parties", list(VERTICAL))
        port = free_ports(1)[0]
        common = ["output.run_id=boosting", f"output.dir={json.dumps(str(root / 'runs'))}", "model.kind=boosting",
                  f"boosting.trees={args.trees}", f"boosting.max_depth={args.depth}",
                  f"boosting.learning_rate={args.learning_rate}", f"boosting.max_bins={BINS}",
                  f"boosting.key_bits={args.key_bits}", f"boosting.early_stopping_rounds={args.early_stopping}",
                  "train.validation_fraction=0.2", f"train.seed={args.seed}",
                  f"boosting.goss_top_rate={args.goss[0]}", f"boosting.goss_other_rate={args.goss[1]}"]
        logs = {p: root / f"{p}.out" for p in configs}
        begin = time.perf_counter()
        procs = {p: start(["train", "--config", str(c), "--quiet",
                           *[x for s in [*common, f"network.listen=127.0.0.1:{port}" if p == "bank"
                                         else f"network.dial=127.0.0.1:{port}"] for x in ("--set", s)]],
                          log=logs[p], show=False) for p, c in configs.items()}
        wait(procs, logs, timeout=1800, step="training")
        wall = time.perf_counter() - begin
        result = json.loads((root / "runs" / "boosting" / "bank" / "result.json").read_text())
    psi = {"Hello", "Blinded", "Doubled"}
    comm = result["comm"]
    trees = result["trees"]
    return {"mode": "two_processes_mutual_tls", "goss": list(args.goss),
            "seconds": round(result["seconds"]["train"], 2), "trees": trees, "kept_trees": result["kept_trees"],
            "seconds_per_tree": round(result["seconds"]["train"] / trees, 3),
            "psi_seconds": round(result["seconds"]["psi"], 2), "wall_seconds_vsplit_train": round(wall, 1),
            "auc": round(result["test"]["auc"], 5), "test_rows": result["test"]["n_scored"],
            "bytes_per_tree": {
                "to_partner": sum(v["bytes"] for k, v in comm["sent"].items() if k not in psi) // trees,
                "to_bank": sum(v["bytes"] for k, v in comm["received"].items() if k not in psi) // trees}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--learning-rate", type=float, default=0.3)
    parser.add_argument("--early-stopping", type=int, default=5)
    parser.add_argument("--goss", type=float, nargs=2, default=[0.2, 0.1], metavar=("TOP", "OTHER"))
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=1, help="worker processes for the ciphertext work (1: none)")
    parser.add_argument("--compare-workers", type=int, default=2,
                        help="also time the first 5 trees with this many worker processes (0: do not)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--two-processes", action=argparse.BooleanOptionalAction, default=True,
                        help="also train as two `vsplit train` processes over mutual TLS")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results-boosting.json")))
    args = parser.parse_args()
    start = os.getloadavg()
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)  # sf-heu's C++ logger writes to stdout: its lines go to stderr, stdout stays one JSON object
    try:
        result = run(args)
        if args.two_processes:
            result["two_processes"] = two_processes(args)
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    result["load_average"] = {"start": [round(x, 2) for x in start], "end": [round(x, 2) for x in os.getloadavg()]}
    text = json.dumps(result, indent=1)
    if args.out != "-":
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
