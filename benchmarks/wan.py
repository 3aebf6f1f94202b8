"""Split training over emulated WAN links: exact, pipelined, local steps and each codec, measured.

Prints one JSON object::

    {"loopback_exact_epoch_s": ..., "links": {"20ms_100mbit": {"<preset>": {"<strategy>": {
        "epoch_s": ..., "bytes_per_epoch": {"bank": ..., "partner": ...}, "auc": ..., "auc_delta": ...}}}}, ...}

Strategies: ``exact``, ``window_2``, ``window_4``, ``window_8``, ``local_steps_2``, ``local_steps_4``, ``float16``,
``bfloat16``, ``int8``, ``topk_0.1`` (see docs/wan.md). Presets: ``bank_marketing`` (embedding width 16, batch 256)
and ``bank_marketing_wide`` (the same data and split with embeddings 256 wide, so the tensors dominate the bytes).

How each figure is obtained:
  epoch_s          two party processes (bank and partner) over mutual TLS on 127.0.0.1, the partner dialing
                   through ``benchmarks/linkem.py`` (one-way delay = half the round trip, the bandwidth cap per
                   direction), one torch thread per party, no validation rows; median of the timed epochs after the
                   first (seed 0). ``loopback_exact_epoch_s``: the same, exact, without the relay.
  bytes_per_epoch  encoded bytes each party sent per training epoch (training frames and validation frames), seed 0.
  auc              test AUC, mean of ``--seeds`` seeds, of the same training run in one process: a run's result
                   does not depend on the link or on timing (tests/test_run_tls.py and tests/test_pipeline_oracle.py
                   check that the processes over TLS reach the in-process parameters bit for bit), so the link
                   runs are not repeated per seed. ``auc_delta`` = auc - exact's auc (same seeds).
Also: ``best``, per link and preset (the fastest strategy whose auc_delta >= -0.003, and its epoch_s over
``loopback_exact_epoch_s``), the load average before and after, and the seconds the benchmark took.

Run: .venv/bin/python benchmarks/wan.py [--seeds 3] [--timing-epochs 3] [--only-preset bank_marketing]
     [--only-link 20ms_100mbit] [--strategies exact,window_8]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from linkem import LinkEmulator

LINKS = {"20ms_100mbit": (0.020, 100e6), "50ms_20mbit": (0.050, 20e6)}
PRESETS = {"bank_marketing": 16, "bank_marketing_wide": 256}
#: strategy name -> (SplitClassifier settings, config overrides of every party)
STRATEGIES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "exact": ({}, []),
    **{f"window_{w}": ({"pipeline_window": w}, [f"train.pipeline_window={w}"]) for w in (2, 4, 8)},
    **{f"local_steps_{k}": ({"local_steps": k}, [f"train.local_steps={k}"]) for k in (2, 4)},
    **{c: ({"compression": c}, [f'network.compression="{c}"']) for c in ("float16", "bfloat16", "int8", "topk_0.1")},
}
BATCH = 256


def _data():
    from vsplit.datasets import preset

    return preset("bank_marketing", seed=0)


def quality(strategy: str, width: int, seeds: int, data: Any) -> dict[str, Any]:
    """Test AUC (mean over seeds) and bytes per epoch of ``strategy``, all parties in this process."""
    import torch

    from vsplit.estimator import SplitClassifier

    settings, _ = STRATEGIES[strategy]
    aucs, sent = [], {}
    for seed in range(seeds):
        torch.manual_seed(seed)
        clf = SplitClassifier(label_party="bank", label=data.label, positive_label=data.positive_label,
                              embedding_width=width, batch_size=BATCH, random_state=seed, **settings)
        clf.fit(data.train)
        aucs.append(clf.evaluate(data.test)["auc"])
        if seed == 0:
            trained = len(clf.history_)
            sent = {p: round(pump.stats.total("sent") / trained) for p, pump in clf.pumps_.items()}
    return {"auc": round(statistics.fmean(aucs), 4), "aucs": [round(a, 4) for a in aucs], "bytes_per_epoch": sent}


def link_epochs(strategy: str, width: int, epochs: int, link: tuple[float, float] | None) -> list[float]:
    """Seconds of each training epoch with bank and partner as processes over mutual TLS, through ``link``."""
    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.orchestrate import free_port, pilot_data
    from vsplit.pilot.prepare import ensure_keys, export_tables

    data = _data()
    _, overrides = STRATEGIES[strategy]
    settings = [f"train.epochs={epochs}", "train.validation_fraction=0.0", "train.patience=100",
                f"train.batch_size={BATCH}", f"model.embedding_width={width}", "output.baselines=false",
                'data.test_path=""', "output.run_id=wan", *overrides]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        export_tables(pilot_data(data, "vertical"), root)
        ensure_keys(root, ["bank", "partner"])
        configs = write_missing_configs(root, label=data.label, positive_label=data.positive_label)
        port = free_port()
        relay = LinkEmulator(target=("127.0.0.1", port), delay_s=link[0] / 2, bandwidth_bps=link[1]) if link else None
        try:
            dial = relay.address[1] if relay else port
            procs = []
            for party, path in configs.items():
                address = f"network.listen=127.0.0.1:{port}" if party == "bank" else f"network.dial=127.0.0.1:{dial}"
                args = [sys.executable, "-m", "vsplit.cli.main", "train", "--config", str(path), "--quiet",
                        "--set", address, *[x for s in settings for x in ("--set", s)]]
                procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                              env=dict(os.environ, PYTHONUNBUFFERED="1")))
            for proc in procs:
                _, err = proc.communicate(timeout=3600)
                if proc.returncode:
                    raise RuntimeError(f"party process failed ({strategy}): {err.decode()[-2000:]}")
        finally:
            if relay:
                relay.close()
        result = json.loads((root / "runs" / "wan" / "bank" / "result.json").read_text())
    return result["epoch_seconds"][1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="seeds for the AUC means")
    parser.add_argument("--timing-epochs", type=int, default=3, help="epochs run over each link, the first not timed")
    parser.add_argument("--only-preset", choices=sorted(PRESETS), action="append")
    parser.add_argument("--only-link", choices=sorted(LINKS), action="append")
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated strategy names")
    args = parser.parse_args(argv)
    strategies = [s for s in args.strategies.split(",") if s]
    unknown = sorted(set(strategies) - set(STRATEGIES))
    if unknown:
        parser.error(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    if "exact" not in strategies:
        strategies.insert(0, "exact")
    import torch

    torch.set_num_threads(1)  # as each party process runs
    began, load = time.perf_counter(), os.getloadavg()
    data = _data()
    presets = args.only_preset or list(PRESETS)
    measured = {(p, s): quality(s, PRESETS[p], args.seeds, data) for p in presets for s in strategies}
    loopback = statistics.median(link_epochs("exact", PRESETS[presets[0]], args.timing_epochs, None))
    out: dict[str, Any] = {"loopback_exact_epoch_s": round(loopback, 4),
                           "loopback_preset": presets[0], "links": {}, "best": {}}
    for link in args.only_link or list(LINKS):
        rows: dict[str, Any] = {}
        for p in presets:
            exact_auc = measured[(p, "exact")]["auc"]
            table = {}
            for s in strategies:
                q = measured[(p, s)]
                seconds = statistics.median(link_epochs(s, PRESETS[p], args.timing_epochs, LINKS[link]))
                table[s] = {"epoch_s": round(seconds, 4), "bytes_per_epoch": q["bytes_per_epoch"], "auc": q["auc"],
                            "auc_delta": round(q["auc"] - exact_auc, 4), "aucs": q["aucs"]}
            good = {s: r for s, r in table.items() if r["auc_delta"] >= -0.003}
            best = min(good, key=lambda s: good[s]["epoch_s"])
            out["best"].setdefault(link, {})[p] = {
                "strategy": best, "epoch_s_over_loopback_exact": round(good[best]["epoch_s"] / loopback, 3)}
            rows[p] = table
        out["links"][link] = rows
    out["settings"] = {"batch_size": BATCH, "seeds": args.seeds, "timing_epochs": args.timing_epochs,
                       "widths": {p: PRESETS[p] for p in presets}}
    out["load_average_before"] = [round(x, 2) for x in load]
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    out["seconds"] = round(time.perf_counter() - began, 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
