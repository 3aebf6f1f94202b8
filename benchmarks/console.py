"""First paint of the console of a finished run, measured in headless Chromium (docs/console.md).

    python benchmarks/console.py [--runs DIR] [--repeats 10] [--out benchmarks/results-console.json]

Without ``--runs`` it first trains a small two-party vertical run (bank_marketing, 3,000 customers, 3 epochs) in
this process over memory channels, with the same ``PartyNode`` code ``vsplit train`` runs, so the folder holds
what a real run writes (report, model card, pictures). It then serves that folder as ``vsplit console --runs`` does
and opens the bank's view ``--repeats`` times in a fresh tab of Debian's headless Chromium, reading the navigation
timing ``first-contentful-paint``. Prints and writes ``first_paint_ms`` (median and max) and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def small_run(root: Path) -> Path:
    """A finished two-party run under ``root``; its runs folder."""
    import dataclasses

    from vsplit.config import load_config
    from vsplit.datasets import preset
    from vsplit.node import PartyNode
    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.prepare import prepare_preset
    from vsplit.transport.memory import memory_pair

    data = preset("bank_marketing", seed=0)
    ids = set(data.train["bank"]["customer_id"].head(3000))
    test = set(data.test["bank"]["customer_id"].head(500))
    data = dataclasses.replace(
        data, train={p: t[t["customer_id"].isin(ids)].reset_index(drop=True) for p, t in data.train.items()},
        test={p: t[t["customer_id"].isin(test)].reset_index(drop=True) for p, t in data.test.items()})
    prepare_preset(data, root)
    configs = write_missing_configs(root, label="y", positive_label="yes", kind="vertical")
    sets = ["output.run_id=bench", "train.epochs=3", "train.init_seed=seed", "output.baselines=false"]
    nodes = {p: PartyNode(load_config(c, overrides=sets), progress=False) for p, c in configs.items()}
    hub, end = memory_pair()
    channels = {"bank": {"partner": hub}, "partner": {"bank": end}}
    threads = [threading.Thread(target=nodes[p].run, args=(channels[p],)) for p in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return nodes["bank"].folder.parent.parent


def first_paints(runs: Path, *, repeats: int) -> list[float]:
    sys.path.insert(0, str(ROOT / "tests"))
    from _browser_support import chromium

    from vsplit.console.server import ConsoleSettings, finished_views, start_console

    views = finished_views(runs)
    server = start_console(views, ConsoleSettings())
    view = next(v for v in views.names() if v.endswith("/bank"))
    driver = chromium()
    out = []
    try:
        for _ in range(repeats):
            driver.switch_to.new_window("tab")
            driver.get(f"{server.url}?view={view}")
            deadline = time.monotonic() + 10
            paint = None
            while paint is None and time.monotonic() < deadline:
                paint = driver.execute_script("const e = performance.getEntriesByName('first-contentful-paint');"
                                              "return e.length ? e[0].startTime : null;")
                time.sleep(0.05)
            out.append(float(paint))
            driver.close()
            driver.switch_to.window(driver.window_handles[0])
    finally:
        driver.quit()
        server.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, help="a finished runs folder (default: train a small one)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here (atomically)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        runs = args.runs or small_run(Path(tmp))
        paints = first_paints(runs, repeats=args.repeats)
    text = json.dumps({"first_paint_ms": {"median": round(statistics.median(paints), 1), "max": round(max(paints), 1)},
                       "repeats": len(paints), "browser": "headless Chromium (Debian)",
                       "load_before": [round(x, 2) for x in load_before],
                       "load_after": [round(x, 2) for x in os.getloadavg()]}, indent=2)
    print(text)
    if args.out is not None:
        from vsplit.atomic import write_atomic

        write_atomic(args.out, (text + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
