"""Issue 46's figures: vertical boosting on bank-full (the `bank_marketing` preset); prints one JSON object.

    python benchmarks/boosting.py [--quick] [--seeds 0 1 2] [--trees 100] [--depth 5] [--learning-rate 0.3]
                                  [--early-stopping 5] [--goss 0.2 0.1] [--key-bits 2048]
                                  [--scale-rows 1000000] [--scale-columns 50] [--scale-trees 2]
                                  [--out benchmarks/results-boosting.json]

The preset splits bank-full's columns between the bank (profile and label) and the partner (the campaign's calls).
``bank_full`` is the headline: the bank and the partner as two ``vsplit train`` processes over mutual TLS (``[model]
kind = "boosting"``, PSI first, then the node's own validation rows: ``train.validation_fraction`` = 0.2 of the
aligned customers drawn by ``train.seed``, early stopping, GOSS through ``boosting.goss_top_rate`` and
``goss_other_rate``, a checkpoint per tree), SecretFlow's tutorial settings, on this machine. ``one_process`` runs the
same machines in this process over memory channels on exactly the node's rows, bins and validation split
(:mod:`boosting_views`), so both grow the same trees (``same_trees_as_two_processes``).

  bank_full.seconds / trees / seconds_per_tree   two processes, early-stopped: training seconds (PSI apart: its own
                                                 psi_seconds), trees grown, seconds per tree; kept_trees: the best
  bank_full.cpu_seconds                          each process's CPU time while it trained (all its threads): wall
                                                 time beyond their sum was spent waiting (or for a core)
  bank_full.seconds_100_trees                    the same, --trees trees without early stopping
  bank_full.auc / pooled_auc                     test AUC of the two-process model and of the pooled reference
                                                 (fit_pooled: same rows, bins, parameters and early stopping)
  bank_full.same_trees                           the bank's saved trees equal the pooled ones (splits; leaves 1e-6)
  bank_full.seeds.<s>                            the same for seeds 0-2 (preset split, validation draw, GOSS)
  bank_full.bytes_per_tree                       encoded frames each way per tree (PSI apart; the test rows' one
                                                 scoring round included), by_message: the bytes of each message type
  bank_full.split_s                              encryption (bank), histograms (partner: ciphertext sums, packing),
                                                 decryption (bank), bank_histograms (its plaintext sums and split
                                                 choice), checkpoints (both), wire_and_rest (the rest of the
                                                 training seconds: the wire, waiting, early stopping's questions)
  one_process.*                                  the same machines and rows in this process (seconds, cpu_seconds)
  xgboost.*                                      pooled XGBoost on the raw columns: same depth, rate, trees, bins,
                                                 early stopping and training/validation rows, both cores, same run
  ratio_to_pooled_xgboost                        bank_full.seconds / xgboost.seconds
  scale.*                                        benchmarks/boosting_scale.py: 1,000,000 synthetic rows, 50 columns
                                                 a party, two processes over mutual TLS, seconds a tree, peak memory
  serve.*                                        benchmarks/boosting_serve.py's run(quick), when that file exists
  load_average                                   os.getloadavg() at the start and the end (the machine is shared)

``--quick``: one seed, 12 trees at most, 100,000 scale rows and one scale tree (a smoke run, not the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # boosting_views, boosting_scale, boosting_serve

BINS = 32
PSI_MESSAGES = {"Hello", "Blinded", "Doubled"}


def prepare(root: Path, seed: int, *, sample: int = 0) -> dict[str, Path]:
    """The bank's and the partner's folders (tables of the preset's split ``seed``, configs, keys) under ``root``;
    ``sample``: only the bank's first ``sample`` training customers and first ``sample // 4`` test customers."""
    from vsplit.datasets import preset
    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.orchestrate import VERTICAL, pilot_data
    from vsplit.pilot.prepare import ensure_keys, export_tables

    data = preset("bank_marketing", seed=seed)
    configs = write_missing_configs(root / "parties", label=data.label, positive_label=data.positive_label,
                                    kind="vertical", roles=dict(VERTICAL))
    tables = pilot_data(data, "vertical")
    if sample:
        for split, count in (("train", sample), ("test", max(sample // 4, 1))):
            part = getattr(tables, split)
            keep = set(part["bank"][data.id_column].head(count))
            for party, table in part.items():
                part[party] = table[table[data.id_column].isin(keep)].reset_index(drop=True)
    export_tables(tables, root / "parties")
    ensure_keys(root / "parties", list(VERTICAL))
    return configs


def overrides(args: argparse.Namespace, *, seed: int, trees: int, early_stopping: int, run_id: str,
              root: Path) -> list[str]:
    return [f"output.run_id={run_id}", f"output.dir={json.dumps(str(root / 'runs'))}", "model.kind=boosting",
            f"boosting.trees={trees}", f"boosting.max_depth={args.depth}",
            f"boosting.learning_rate={args.learning_rate}", f"boosting.max_bins={BINS}",
            f"boosting.key_bits={args.key_bits}", f"boosting.early_stopping_rounds={early_stopping}",
            "train.validation_fraction=0.2", f"train.seed={seed}",
            f"boosting.goss_top_rate={args.goss[0]}", f"boosting.goss_other_rate={args.goss[1]}"]


def two_processes(configs: dict[str, Path], sets: list[str], root: Path, run_id: str) -> dict[str, Any]:
    """Both parties' ``vsplit train`` over mutual TLS; each one's result.json, the bank's trees, the wall time."""
    from vsplit.node.boost_state import trees_from
    from vsplit.pilot.processes import start, wait
    from vsplit.runtime.checkpoint import load_checkpoint
    from vsplit.transport.ports import free_ports

    port = free_ports(1)[0]
    logs = {p: root / f"{p}-{run_id}.out" for p in configs}
    begin = time.perf_counter()
    procs = {p: start(["train", "--config", str(c), "--quiet",
                       *[x for s in [*sets, f"network.listen=127.0.0.1:{port}" if p == "bank"
                                     else f"network.dial=127.0.0.1:{port}"] for x in ("--set", s)]],
                      log=logs[p], show=False) for p, c in configs.items()}
    wait(procs, logs, timeout=3600, step="training")
    wall = time.perf_counter() - begin
    folder = root / "runs" / run_id
    results = {p: json.loads((folder / p / "result.json").read_text()) for p in configs}
    model = load_checkpoint(folder / "bank" / "model.npz", run_id=run_id, party="bank")
    return {"results": results, "trees": trees_from(model), "wall": wall}


def figures(run: dict[str, Any]) -> dict[str, Any]:
    """Seconds, trees, AUC, bytes and the time split of a two-process run."""
    bank, partner = run["results"]["bank"], run["results"]["partner"]
    trees, train = bank["trees"], bank["seconds"]["train"]
    comm = bank["comm"]
    by_message = {direction: {k: v["bytes"] // trees for k, v in sorted(comm[side].items()) if k not in PSI_MESSAGES}
                  for direction, side in (("to_partner", "sent"), ("to_bank", "received"))}
    work = {"encryption": bank["work_seconds"].get("encryption", 0.0),
            "histograms": partner["work_seconds"].get("histograms", 0.0),
            "decryption": bank["work_seconds"].get("decryption", 0.0),
            "bank_histograms": bank["work_seconds"].get("histograms", 0.0),
            "checkpoints": bank["work_seconds"].get("checkpoints", 0.0)
            + partner["work_seconds"].get("checkpoints", 0.0)}
    split = {k: round(v, 2) for k, v in work.items()}
    split["wire_and_rest"] = round(train - sum(work.values()), 2)
    return {"mode": "two_processes_mutual_tls", "seconds": round(train, 2), "trees": trees,
            "kept_trees": bank["kept_trees"], "seconds_per_tree": round(train / trees, 3),
            "psi_seconds": round(bank["seconds"]["psi"], 2), "wall_seconds_vsplit_train": round(run["wall"], 1),
            "cpu_seconds": {p: round(r["work_seconds"].get("cpu", 0.0), 2) for p, r in run["results"].items()},
            "auc": round(bank["test"]["auc"], 5), "test_rows": bank["test"]["n_scored"],
            "bytes_per_tree": {d: sum(v.values()) for d, v in by_message.items()} | {"by_message": by_message},
            "split_s": split}


def pooled(views: dict[str, Any], *, trees: int) -> dict[str, Any]:
    """The pooled reference on the node's rows and bins: ``trees`` trees, early-stopped on the same held-out rows."""
    from vsplit.boosting import fit_pooled
    from vsplit.boosting.early import first_stop, log_loss

    bank, partner = views["bank"], views["partners"][0]
    params = _with_trees(views["params"], trees)
    model = fit_pooled([views["parties"][bank]["train"], views["parties"][partner]["train"]], views["labels"]["train"],
                       widths=[views["parties"][bank]["width"], views["parties"][partner]["width"]], params=params)
    held = _staged(model, views, "held")
    losses = [log_loss(views["labels"]["held"], m) for m in held]
    grown, kept = len(losses), len(losses)  # no early stopping: every tree
    if views["rounds"]:
        stop = first_stop(losses, rounds=views["rounds"])
        grown, kept = stop if stop is not None else (len(losses), int(np.argmin(losses)) + 1)
    test = _staged(model, views, "test")[kept - 1]
    return {"model": model, "grown": grown, "kept": kept, "auc": _auc(views["labels"]["test"], test)}


def _with_trees(params: Any, trees: int) -> Any:
    import dataclasses

    return dataclasses.replace(params, trees=trees)


def _staged(model: Any, views: dict[str, Any], part: str) -> np.ndarray:
    """``(trees, rows)``: the pooled model's margin on ``part``'s rows after each tree."""
    from vsplit.boosting import BoostModel
    from vsplit.boosting.gains import goes_left

    partner = views["parties"][views["partners"][0]]
    splits = sorted((s.record, s) for t in model.trees for s in t.splits.values() if s.party == 1)
    bits = np.zeros((len(partner[part]), len(splits)), dtype=np.uint8)
    for record, s in splits:
        bits[:, record] = goes_left(partner[part][:, s.column], bin=s.bin, missing_left=s.missing_left,
                                    width=partner["width"])
    own = views["parties"][views["bank"]][part]
    steps = [BoostModel(trees=(t,), base=0.0, widths=model.widths).margins(own_codes=own, decisions={1: bits})
             for t in model.trees]
    return model.base + np.cumsum(steps, axis=0)


def same_trees(ours: list[Any], theirs: list[Any]) -> bool:
    """Same splits in every tree, leaves within 1e-6."""
    return len(ours) == len(theirs) and all(
        {n: s.key() for n, s in a.splits.items()} == {n: s.key() for n, s in b.splits.items()}
        and max(abs(a.leaves[n] - b.leaves[n]) for n in a.leaves) <= 1e-6 for a, b in zip(ours, theirs, strict=True))


def _auc(y: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(y, score)), 5)


def one_process(views: dict[str, Any], *, key_bits: int) -> dict[str, Any]:
    """The node's machines (early stopping around training) in this process over memory channels."""
    from vsplit.boosting import LabelBoost, PartnerBoost
    from vsplit.boosting.early import StoppingLabel, StoppingPartner
    from vsplit.he import generate_keypair
    from vsplit.runtime.inprocess import connect, run_machines

    bank, partner = views["bank"], views["partners"][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test-only flag warns below 2048 bits
        keys = generate_keypair(key_bits=key_bits, insecure_small_key_for_tests=key_bits < 2048)
    small = key_bits < 2048
    mine, theirs = views["parties"][bank], views["parties"][partner]
    label = LabelBoost(mine["train"], width=mine["width"], labels=views["labels"]["train"], partners=[partner],
                       params=views["params"], keys=keys)
    other = PartnerBoost(theirs["train"], width=theirs["width"], label=bank, min_key_bits=key_bits,
                         insecure_small_key_for_tests=small)
    machines: dict[str, Any] = {bank: label, partner: other}
    if views["rounds"]:
        machines = {bank: StoppingLabel(label, own_codes=mine["held"], labels=views["labels"]["held"],
                                        rounds=views["rounds"]),
                    partner: StoppingPartner(other, codes=theirs["held"])}
    start, cpu = time.perf_counter(), time.process_time()
    results = run_machines(connect([bank, partner], session=os.urandom(16)), machines)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    work = {"encryption": label.seconds["encryption"], "histograms": other.seconds["histograms"],
            "decryption": label.seconds["decryption"], "bank_histograms": label.seconds["histograms"]}
    split = {k: round(v, 2) for k, v in work.items()} | {"wire_and_rest": round(seconds - sum(work.values()), 2)}
    return {"mode": "one_process", "seconds": round(seconds, 2), "trees": len(label.trees),
            "kept_trees": len(results[bank].trees), "seconds_per_tree": round(seconds / len(label.trees), 3),
            "cpu_seconds": round(cpu, 2), "split_s": split, "grown": label.trees}


def pooled_xgboost(views: dict[str, Any], args: argparse.Namespace, *, seed: int) -> dict[str, Any]:
    """XGBoost on the pooled bins' codes of the node's rows: same depth, rate, trees, bins, early stopping and
    validation rows; both cores."""
    import xgboost

    bank, partner = views["bank"], views["partners"][0]

    def pooled_x(part: str) -> np.ndarray:
        return np.hstack([views["parties"][bank][part], views["parties"][partner][part]]).astype(np.float32)

    model = xgboost.XGBClassifier(n_estimators=args.trees, max_depth=args.depth, learning_rate=args.learning_rate,
                                  max_bin=BINS + 2, tree_method="hist", reg_lambda=1.0, min_child_weight=1.0,
                                  early_stopping_rounds=args.early_stopping, eval_metric="logloss", n_jobs=2,
                                  random_state=seed)
    start = time.perf_counter()
    model.fit(pooled_x("train"), views["labels"]["train"], eval_set=[(pooled_x("held"), views["labels"]["held"])],
              verbose=False)
    seconds = time.perf_counter() - start
    score = model.predict_proba(pooled_x("test"))[:, 1]
    return {"seconds": round(seconds, 3), "trees": int(model.best_iteration) + 1,
            "auc": _auc(views["labels"]["test"], score), "version": xgboost.__version__}


def one_seed(args: argparse.Namespace, seed: int, *, headline: bool) -> dict[str, Any]:
    """Two processes (and, for the headline seed, one process, 100 trees and XGBoost) on the preset's split
    ``seed``; the pooled reference beside each."""
    import tempfile

    from boosting_views import node_views

    with tempfile.TemporaryDirectory(prefix="vsplit-boosting-") as tmp:
        root = Path(tmp)
        configs = prepare(root, seed, sample=args.sample)
        sets = overrides(args, seed=seed, trees=args.trees, early_stopping=args.early_stopping, run_id="es",
                         root=root)
        run = two_processes(configs, sets, root, "es")
        out = figures(run)
        views = node_views(configs, overrides=sets)
        ref = pooled(views, trees=out["trees"])
        out |= {"pooled_auc": ref["auc"], "pooled_trees": ref["kept"],
                "same_trees": same_trees(run["trees"], list(ref["model"].trees[: ref["kept"]])),
                "rows": {"train": len(views["labels"]["train"]), "valid": len(views["labels"]["held"]),
                         "test": len(views["labels"]["test"])}}
        if not headline:
            return out
        extra: dict[str, Any] = {"one_process": one_process(views, key_bits=args.key_bits)}
        grown = extra["one_process"].pop("grown")
        extra["one_process"]["same_trees_as_two_processes"] = same_trees(grown[: out["kept_trees"]], run["trees"])
        extra["xgboost"] = pooled_xgboost(views, args, seed=seed)
        full = figures(two_processes(configs, overrides(args, seed=seed, trees=args.trees, early_stopping=0,
                                                         run_id="all", root=root), root, "all"))
        out[f"seconds_{args.trees}_trees"] = full["seconds"]
        out[f"trees_{args.trees}_run"] = {k: full[k] for k in ("trees", "seconds_per_tree", "auc", "split_s")}
        return out | {"_extra": extra}


def run(args: argparse.Namespace) -> dict[str, Any]:
    seeds: dict[str, Any] = {}
    head: dict[str, Any] = {}
    for k, seed in enumerate(args.seeds):
        got = one_seed(args, seed, headline=k == 0)
        if k == 0:
            head = got
        seeds[str(seed)] = {key: got[key] for key in ("trees", "kept_trees", "seconds", "seconds_per_tree", "auc",
                                                      "pooled_auc", "same_trees")}
    extra = head.pop("_extra")
    bank_full = head | {"seed": args.seeds[0], "seeds": seeds,
                        "auc_gap_max": round(max(abs(s["auc"] - s["pooled_auc"]) for s in seeds.values()), 5)}
    return {"settings": {"depth": args.depth, "learning_rate": args.learning_rate, "max_trees": args.trees,
                         "early_stopping_rounds": args.early_stopping, "bins": BINS, "goss": list(args.goss),
                         "scheme": "ou", "key_bits": args.key_bits, "seeds": list(args.seeds),
                         "validation_fraction": 0.2, "early_stopping_metric": "validation log-loss",
                         "cores": os.cpu_count(), "quick": args.quick},
            "bank_full": bank_full, **extra,
            "ratio_to_pooled_xgboost": round(bank_full["seconds"] / extra["xgboost"]["seconds"], 1)}


def serve(quick: bool, previous: dict[str, Any]) -> dict[str, Any] | None:
    """benchmarks/boosting_serve.py's figures if that file exists, else the last JSON's ``serve`` (or none)."""
    if not (Path(__file__).resolve().parent / "boosting_serve.py").is_file():
        return previous.get("serve")
    import boosting_serve

    return boosting_serve.run(quick)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run (one seed, few trees, small scale)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--learning-rate", type=float, default=0.3)
    parser.add_argument("--early-stopping", type=int, default=5)
    parser.add_argument("--goss", type=float, nargs=2, default=[0.2, 0.1], metavar=("TOP", "OTHER"))
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--scale-rows", type=int, default=1_000_000)
    parser.add_argument("--scale-columns", type=int, default=50, help="columns a party")
    parser.add_argument("--scale-trees", type=int, default=2)
    parser.add_argument("--scale", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--sample", type=int, default=0,
                        help="bank-full's first N training customers only (0: all; for smoke tests)")
    parser.add_argument("--serve", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--out", default=str(Path(__file__).with_name("results-boosting.json")))
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.trees = args.seeds[:1], min(args.trees, 12)
        args.scale_rows, args.scale_trees = min(args.scale_rows, 100_000), 1
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    out = Path(args.out) if args.out != "-" else None
    previous = json.loads(out.read_text()) if out is not None and out.is_file() else {}
    start = os.getloadavg()
    began = time.perf_counter()
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)  # sf-heu's C++ logger writes to stdout: its lines go to stderr, stdout stays one JSON object
    try:
        result = run(args)
        if args.scale:
            import boosting_scale

            result["scale"] = boosting_scale.run(rows=args.scale_rows, columns=args.scale_columns,
                                                 trees=args.scale_trees, depth=args.depth, goss=(0.1, 0.1),
                                                 key_bits=args.key_bits)
        served = serve(args.quick, previous) if args.serve else previous.get("serve")
        if served is not None:
            result["serve"] = served
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    result["load_average"] = {"start": [round(x, 2) for x in start], "end": [round(x, 2) for x in os.getloadavg()]}
    result["benchmark_seconds"] = round(time.perf_counter() - began, 1)
    text = json.dumps(result, indent=1)
    if out is not None:
        out.write_text(text + "\n")
    print(text)
    return result


if __name__ == "__main__":
    main()
