"""A bank lost mid-run and readmitted: what coming back costs and what it gives, against staying out.

    python benchmarks/readmit.py [--banks 4] [--rounds 20] [--kill-after 3] [--out benchmarks/results-readmit.json]

Default credit dealt to ``--banks`` banks (IID, as ``vsplit pilot splitfed-credit`` deals it), SplitFed v1 with a
separate federated server and secure aggregation on (the pilot's settings: batch 256), every party its own OS process
over mutual TLS (``vsplit run``), three runs from the same seed:

- ``uninterrupted``: nobody fails;
- ``stays_out``: bank_3 is killed once the server has saved round ``--kill-after`` and not restarted (the run goes on
  without it, and bank_3 ends with no final model, only its round checkpoints);
- ``readmitted``: bank_3 is killed at the same point and restarted at once with ``--resume``, at the speed this machine
  starts a process (nothing pauses), and comes back when the server next answers it.

Prints one JSON object: per run the test AUC of the run's final model (the last average of the client segments,
which every bank still in the run holds, and the server's segment; each bank's rows through its own preprocessing)
on the pooled test rows of every bank and on bank_3's own test rows (in ``stays_out`` a model bank_3 does not get),
whether bank_3 has a final model; for
``readmitted`` the round it came back at, the rounds it missed, the seconds from the restart to the server's answer
(``restart_to_answer_s``: process start-up, waiting for the server to give the dead process up after
``network.reconnect_timeout_s`` = 2 s, connecting, and waiting for the server to reach a stage that takes it), the new
process's seconds to connect, to be answered by the server (join) and to get the average (catch_up), from its
``result.json``, and the median seconds of a server round; the wall seconds of each run; the load average at the
start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def start_party(args: list[str], log: Path) -> subprocess.Popen:
    """``vsplit ARGS`` as its own OS process, its output to ``log``."""
    handle = open(log, "w")  # the child owns it from here
    return subprocess.Popen([sys.executable, "-m", "vsplit.cli.main", *args], stdout=handle, stderr=subprocess.STDOUT,
                            cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def one_run(root: Path, *, mode: str, banks: int, rounds: int, kill_after: int) -> dict[str, Any]:
    """One run in ``root`` (``mode``: uninterrupted, stays_out or readmitted); its figures."""
    from vsplit.config import load_config
    from vsplit.pilot.horizontal import SERVER, prepare_horizontal

    run_id = f"readmit-{mode}"
    configs = prepare_horizontal(root, banks=banks, run_id=run_id, federated=True, schedule={"kind": "splitfed_v1"},
                                 train={"epochs": rounds, "batch_size": 256})
    sets = ["--set", "network.reconnect_timeout_s=2"]
    started = time.perf_counter()
    procs = {p: start_party(["run", "--config", str(c), "--quiet", *sets], root / f"{p}.log")
             for p, c in configs.items()}
    out: dict[str, Any] = {}
    if mode != "uninterrupted":
        run_dir = root / "runs" / run_id
        mark = run_dir / SERVER / "checkpoints" / f"round-{kill_after:04d}.npz"
        deadline = time.monotonic() + 600
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        procs["bank_3"].send_signal(signal.SIGKILL)
        procs["bank_3"].wait(timeout=60)
        if mode == "readmitted":
            restarted = time.time()
            procs["bank_3"] = start_party(["run", "--config", str(configs["bank_3"]), "--quiet", "--resume", *sets],
                                     root / "bank_3.again.log")
        else:
            del procs["bank_3"]
    for party, proc in procs.items():
        if proc.wait(timeout=1800) != 0:
            raise SystemExit(f"{mode}: {party} failed:\n{(root / f'{party}.log').read_text()[-2000:]}")
    out["wall_s"] = round(time.perf_counter() - started, 2)
    loaded = {p: load_config(c) for p, c in configs.items()}
    run_dir = root / "runs" / run_id
    out["bank_3_has_a_final_model"] = (run_dir / "bank_3" / "model.npz").exists()
    out.update(score(run_dir, loaded))
    server = json.loads((run_dir / SERVER / "result.json").read_text())
    out["lost"] = server["lost"]
    out["readmitted"] = server.get("readmitted", {})
    if mode == "readmitted":
        back = server["readmitted"]["bank_3"]
        bank = json.loads((run_dir / "bank_3" / "result.json").read_text())
        out["rounds_missed"] = back - kill_after - 1
        out["bank_3_seconds"] = {k: bank["seconds"].get(k) for k in ("connect", "join", "catch_up")}
        out["restart_to_answer_s"] = round(_answered_at(run_dir / SERVER / "log.txt") - restarted, 2)
        out["round_s_server_median"] = round(float(sorted(server["round_seconds"])[rounds // 2]), 3)
    return out


def _answered_at(log: Path) -> float:
    """When the server's log says it answered bank_3 coming back (epoch seconds, from the line's timestamp)."""
    import datetime as dt

    for line in log.read_text().splitlines():
        if "'bank_3' came back" in line:
            stamp = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return stamp.replace(tzinfo=dt.datetime.now().astimezone().tzinfo).timestamp()
    raise SystemExit(f"{log}: no line says bank_3 came back")


def score(run_dir: Path, configs: dict[str, Any]) -> dict[str, Any]:
    """Test AUC of the run's final model: every bank's test rows through its own preprocessing, bank_1's final
    client segment (the last average, which every bank still in the run holds) and the server's segment; pooled over
    the banks, and on bank_3's rows alone."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from vsplit.pilot.horizontal import FEDERATED, SERVER
    from vsplit.pilot.splitfed import score_bank
    from vsplit.runtime.checkpoint import load_checkpoint

    def saved(party: str) -> dict[str, Any]:
        run_id = configs[party].output.run_id
        return load_checkpoint(run_dir / party / "model.npz", run_id=run_id, party=party)["segments"]

    final = {**saved("bank_1"), **saved(SERVER)}
    ys, ps, per_bank = [], [], {}
    for party, config in configs.items():
        if party in (SERVER, FEDERATED):
            continue
        _, _, y, proba = score_bank(config, configs[SERVER], final)
        per_bank[party] = round(float(roc_auc_score(y, proba)), 4)
        ys.append(y)
        ps.append(proba)
    return {"auc_pooled_test": round(float(roc_auc_score(np.concatenate(ys), np.concatenate(ps))), 4),
            "auc_bank_3_test": per_bank["bank_3"], "auc_per_bank": per_bank}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--banks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--kill-after", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.banks < 4:
        raise SystemExit("--banks: at least 4 (secure aggregation needs 3 banks left while bank_3 is out)")
    result: dict[str, Any] = {"load_average_start": [round(x, 2) for x in os.getloadavg()],
                              "banks": args.banks, "rounds": args.rounds, "killed_after_round": args.kill_after,
                              "settings": "splitfed_v1, federated server, secure aggregation on, batch 256, IID"}
    with tempfile.TemporaryDirectory(prefix="vsplit-readmit-") as tmp:
        for mode in ("uninterrupted", "stays_out", "readmitted"):
            result[mode] = one_run(Path(tmp) / mode, mode=mode, banks=args.banks, rounds=args.rounds,
                                   kill_after=args.kill_after)
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        from vsplit.atomic import write_atomic

        write_atomic(args.out, (text + "\n").encode())


if __name__ == "__main__":
    main()
