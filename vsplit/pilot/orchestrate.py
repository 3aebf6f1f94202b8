"""Run a whole pilot on one machine: one OS process per party over mutual TLS on localhost, then the report.

Theory of operation. :func:`run_pilot` lays out each party's folder (own data, own keys, the peer's pinned
certificate), starts ``vsplit train`` for the bank and the partner as two processes, waits for both, then starts
``vsplit predict`` for both to score the bank's test customers with the saved model parts. Finally it trains the
centralized baseline (only possible here, where the pooled data exists) and adds it to the bank's report.
``parties/run_pilot.sh`` shows the same steps by hand.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vsplit.config import load_config, resolve
from vsplit.errors import VsplitError
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.prepare import prepare_preset
from vsplit.runtime.atomic import write_atomic

PRESETS = {"bank-marketing": "bank_marketing", "bank-marketing-no-duration": "bank_marketing_no_duration",
           "secretflow-bank": "secretflow_bank", "default-credit": "default_credit"}


@dataclass
class PilotResult:
    run_dir: Path
    report: dict[str, Any]
    seconds: float


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], *, log: Path, show: bool) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    out = None if show else open(log, "w")  # the child owns it from here
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # our own interpreter and module, arguments built here from config paths: no shell, no untrusted input
    return subprocess.Popen([sys.executable, "-m", "vsplit.cli.main", *args], stdout=out,  # noqa: S603
                            stderr=None if show else subprocess.STDOUT, env=env)


def _wait(processes: dict[str, subprocess.Popen], logs: dict[str, Path], *, timeout: float, step: str) -> None:
    deadline = time.monotonic() + timeout
    pending = dict(processes)
    while pending:
        for name, proc in list(pending.items()):
            code = proc.poll()
            if code is None:
                continue
            del pending[name]
            if code != 0:
                for other in pending.values():
                    other.terminate()
                tail = logs[name].read_text()[-2000:] if logs[name].exists() else "(see the output above)"
                raise VsplitError(f"pilot {step}: {name} exited with code {code}; its log ends with:\n{tail}")
        if time.monotonic() > deadline:
            for proc in pending.values():
                proc.kill()
            raise VsplitError(f"pilot {step}: {sorted(pending)} did not finish within {timeout:.0f} s")
        time.sleep(0.05)


def run_pilot(
    name: str,
    *,
    root: Path | None = None,
    run_id: str | None = None,
    overrides: tuple[str, ...] = (),
    quiet: bool = False,
    timeout: float = 1800.0,
) -> PilotResult:
    """Run the pilot on bundled preset ``name`` (e.g. ``"bank-marketing"``) and return the bank's report."""
    from vsplit.datasets import preset

    if name not in PRESETS:
        raise VsplitError(f"unknown pilot {name!r}; choose one of: {', '.join(PRESETS)}")
    started = time.perf_counter()
    data = preset(PRESETS[name], seed=0)
    run_id = run_id or f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    root = root or (Path("parties") if name == "bank-marketing" else Path("runs") / "pilots" / name)
    configs = write_missing_configs(root, label=data.label, positive_label=data.positive_label)
    prepare_preset(data, root)
    port = free_port()
    runs = Path("runs").resolve()
    common = [f"output.run_id={run_id}", f"output.dir={json.dumps(str(runs))}", *overrides]
    sets = {"bank": [*common, f"network.listen=127.0.0.1:{port}"],
            "partner": [*common, f"network.dial=127.0.0.1:{port}"]}
    bank_config = load_config(configs["bank"], overrides=sets["bank"])
    run_dir = resolve(bank_config, bank_config.output.dir) / run_id
    logs = {p: run_dir / f"{p}.out" for p in configs}

    def launch(command: list[str], extra: dict[str, list[str]]) -> dict[str, subprocess.Popen]:
        procs = {}
        for party, path in configs.items():
            args = [command[0], "--config", str(path), *command[1:], *extra.get(party, [])]
            args += [x for s in sets[party] for x in ("--set", s)]
            show = party == "bank" and not quiet
            procs[party] = _start(args + ([] if show else ["--quiet"]), log=logs[party], show=show)
        return procs

    _wait(launch(["train"], {}), logs, timeout=timeout, step="training")
    test_ids = root / "bank" / "data" / "score_ids.csv"
    write_atomic(test_ids, data.test["bank"][[data.id_column]].to_csv(index=False).encode())
    predict_inputs = {p: ["--input", str((root / p / "data" / "test.parquet").resolve())] for p in configs}
    predict_inputs["bank"] += ["--ids", str(test_ids.resolve())]
    _wait(launch(["predict"], predict_inputs), logs, timeout=timeout, step="prediction")

    report = _add_centralized_baseline(run_dir, data, bank_config)
    report = _merge_partner(run_dir, report)
    from vsplit.report.render import render_report

    render_report(run_dir / "bank", report)
    seconds = time.perf_counter() - started
    return PilotResult(run_dir=run_dir, report=report, seconds=seconds)


def _add_centralized_baseline(run_dir: Path, data: Any, config: Any) -> dict[str, Any]:
    """Train the same bottoms and top on the pooled columns (no cut) and score the same test customers."""
    from vsplit.estimator import SplitClassifier
    from vsplit.evaluation import shared_test_views

    report = json.loads((run_dir / "bank" / "report.json").read_text())
    t, m, d = config.train, config.model, config.data
    began = time.perf_counter()
    clf = SplitClassifier(
        label_party="bank", label=data.label, id_column=data.id_column, positive_label=data.positive_label,
        mode="centralized", embedding_width=m.embedding_width, bottom_hidden=m.bottom_hidden,
        top_hidden=m.top_hidden, merge=m.merge, dropout=m.dropout, optimizer=t.optimizer, lr=t.lr,
        weight_decay=t.weight_decay, epochs=t.epochs, batch_size=t.batch_size,
        validation_fraction=t.validation_fraction, patience=t.patience, scaling=d.scaling, missing=d.missing,
        random_state=t.seed, alignment="join",
    ).fit(data.train)
    metrics = clf.evaluate(shared_test_views(data.test, label_party="bank", id_column=data.id_column))
    report["baselines"]["centralized"] = metrics
    report["seconds"]["centralized_baseline"] = round(time.perf_counter() - began, 3)
    return report


def _merge_partner(run_dir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Add every other party's own communication and config hash (its ``report.json`` in ``run_dir``)."""
    for path in sorted(run_dir.glob("*/report.json")):
        if path.parent.name == report.get("party"):
            continue
        theirs = json.loads(path.read_text())
        report["communication"][theirs.get("party", path.parent.name)] = theirs["communication"]
        report["config_hashes"].update(theirs.get("config_hashes", {}))
    return report
