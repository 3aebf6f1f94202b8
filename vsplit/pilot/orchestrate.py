"""Run a whole pilot on one machine: one OS process per party over mutual TLS on localhost, then the report.

Theory of operation. :func:`run_pilot` lays out each party's folder (own data, own keys, the peers' pinned
certificates), starts ``vsplit train`` for every party as its own process (vertical: the bank and its partner;
vanilla: the partner with the columns and the bank with the labels; U-shaped: the bank and a compute party),
waits for all, then starts ``vsplit predict`` for all to score the bank's test customers with the saved parts.
Finally it trains the centralized baseline (only possible here, where the pooled data exists) and adds it, with
the partner's own traffic, to the bank's merged report (``report-merged.json``; the bank's ``report.json`` stays as
its process wrote it).
``parties/run_pilot.sh`` shows the same steps by hand.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vsplit.atomic import write_atomic
from vsplit.config import load_config, resolve
from vsplit.errors import VsplitError
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.prepare import ensure_keys, export_tables
from vsplit.pilot.processes import start, wait
from vsplit.runtime.jobs import default_job_id

VERTICAL = {"bank": "label", "partner": "feature"}
#: the scoring jobs of the pilot's batch predictions: <run>/<party>/predictions/pilot-<UTC time>/
PREDICT_JOB = "pilot"


@dataclass(frozen=True)
class PilotSpec:
    """A pilot: the bundled preset, the kind of split, and each party's role."""

    preset: str
    kind: str = "vertical"
    roles: tuple[tuple[str, str], ...] = tuple(VERTICAL.items())


PILOTS = {
    "bank-marketing": PilotSpec("bank_marketing"),
    "bank-marketing-no-duration": PilotSpec("bank_marketing_no_duration"),
    "secretflow-bank": PilotSpec("secretflow_bank"),
    "default-credit": PilotSpec("default_credit"),
    # a data owner (the partner, every column) and a model owner (the bank, the outcomes and the layers after the cut)
    "vanilla-credit": PilotSpec("default_credit", "vanilla"),
    # the bank keeps every column, the labels, the first and the last layers; a compute provider runs the middle
    "u-shaped-credit": PilotSpec("default_credit", "u_shaped", (("bank", "label"), ("cloud", "compute"))),
    # three banks with the same columns, a server and a federated server (SplitFed; --set schedule.kind=... for others)
    "splitfed-credit": PilotSpec("default_credit", "horizontal", ()),
}
PRESETS = PILOTS  # the pilot names `vsplit pilot` accepts


@dataclass(frozen=True)
class PilotData:
    """Each party's train and test tables for a pilot's kind of split (a compute party has none)."""

    train: dict[str, Any]
    test: dict[str, Any]


def pilot_data(data: Any, kind: str) -> PilotData:
    """The preset's tables as the split needs them: vertical as bundled; vanilla: the partner has every feature
    column of the customers both know, the bank only the labels; U-shaped: the bank has every column and label."""
    if kind == "vertical":
        return PilotData(train=dict(data.train), test=dict(data.test))
    tables: dict[str, dict[str, Any]] = {"train": {}, "test": {}}
    for split in ("train", "test"):
        pooled = data.pooled(split)
        if kind == "vanilla":
            labels = getattr(data, split)[data.label_party][[data.id_column, data.label]]
            tables[split] = {"bank": labels.reset_index(drop=True),
                             "partner": pooled.drop(columns=[data.label]).reset_index(drop=True)}
        else:
            tables[split] = {"bank": pooled.reset_index(drop=True)}
    return PilotData(train=tables["train"], test=tables["test"])


@dataclass
class PilotResult:
    run_dir: Path
    report: dict[str, Any]
    seconds: float
    job: str = PREDICT_JOB

    @property
    def predictions(self) -> Path:
        """The bank's ``predictions.csv`` of the pilot's batch prediction."""
        return self.run_dir / "bank" / "predictions" / self.job / "predictions.csv"


def run_pilot(
    name: str,
    *,
    root: Path | None = None,
    run_id: str | None = None,
    overrides: tuple[str, ...] = (),
    quiet: bool = False,
    timeout: float = 1800.0,
    console: bool = False,
) -> PilotResult:
    """Run the pilot on bundled preset ``name`` (e.g. ``"bank-marketing"``) and return the bank's report."""
    from vsplit.datasets import preset

    if name not in PILOTS:
        raise VsplitError(f"unknown pilot {name!r}; choose one of: {', '.join(PILOTS)}")
    spec = PILOTS[name]
    if spec.kind == "horizontal":
        from vsplit.pilot.splitfed import run_splitfed_pilot

        report = run_splitfed_pilot(root=root, run_id=run_id, overrides=overrides, quiet=quiet, timeout=timeout)
        return PilotResult(run_dir=Path(report["report"]).parent, report=report, seconds=report["seconds"], job="")
    roles = dict(spec.roles)
    started = time.perf_counter()
    data = preset(spec.preset, seed=0)
    tables = pilot_data(data, spec.kind)
    run_id = run_id or f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    root = root or (Path("parties") if name == "bank-marketing" else Path("runs") / "pilots" / name)
    configs = write_missing_configs(root, label=data.label, positive_label=data.positive_label, kind=spec.kind,
                                    roles=roles)
    export_tables(tables, root)
    ensure_keys(root, list(roles))
    hub = next(p for p, r in roles.items() if r == ("compute" if spec.kind == "u_shaped" else "label"))
    from vsplit.transport.ports import free_ports

    port = free_ports(1)[0]
    runs = Path("runs").resolve()
    common = [f"output.run_id={run_id}", f"output.dir={json.dumps(str(runs))}", *overrides]
    sets = {p: [*common, f"network.listen=127.0.0.1:{port}" if p == hub else f"network.dial=127.0.0.1:{port}"]
            for p in roles}
    bank_config = load_config(configs["bank"], overrides=sets["bank"])
    run_dir = resolve(bank_config, bank_config.output.dir) / run_id
    logs = {p: run_dir / f"{p}.out" for p in configs}

    def launch(command: list[str], extra: dict[str, list[str]]) -> dict[str, subprocess.Popen]:
        procs = {}
        for party, path in configs.items():
            args = [command[0], "--config", str(path), *command[1:], *extra.get(party, [])]
            args += [x for s in sets[party] for x in ("--set", s)]
            show = party == "bank" and not quiet
            procs[party] = start(args + ([] if show else ["--quiet"]), log=logs[party], show=show)
        return procs

    consoles: dict[str, list[str]] = {}
    if console:  # each party's own console, on a port of its own (docs/console.md)
        for party, console_port in zip(configs, free_ports(len(configs)), strict=True):
            consoles[party] = ["--console", "--set", f"console.port={console_port}"]
            print(f"vsplit pilot: {party}'s console: http://127.0.0.1:{console_port}/", flush=True)
    wait(launch(["train"], consoles), logs, timeout=timeout, step="training")
    test_ids = root / "bank" / "data" / "score_ids.csv"
    write_atomic(test_ids, tables.test["bank"][[data.id_column]].to_csv(index=False).encode())
    predict_inputs = {p: ["--input", str((root / p / "data" / "test.parquet").resolve())] for p in tables.test}
    predict_inputs["bank"] += ["--ids", str(test_ids.resolve())]
    job = f"{PREDICT_JOB}-{default_job_id()}"  # a pilot run again under its run ID scores as a new job
    if not quiet:  # vsplit predict draws no bar: say what the next seconds are for
        print("vsplit pilot: scoring the test customers with the saved model parts (vsplit predict at each party) ...",
              flush=True)
    wait(launch(["predict", "--job", job], predict_inputs), logs, timeout=timeout, step="prediction")

    from vsplit.models.secret import init_seed

    # every party runs on this machine: the centralized run starts from each party's own init seed, as the split did
    init_seeds = {p: init_seed(load_config(configs[p], overrides=sets[p])) for p in roles}
    report = _add_centralized_baseline(run_dir, data, bank_config, spec, tables, init_seeds=init_seeds, quiet=quiet)
    from vsplit.report.merge import merge_reports
    from vsplit.report.render import render_report

    report = merge_reports(run_dir, report)

    render_report(run_dir / "bank", report)
    seconds = time.perf_counter() - started
    return PilotResult(run_dir=run_dir, report=report, seconds=seconds, job=job)


def _add_centralized_baseline(run_dir: Path, data: Any, config: Any, spec: PilotSpec,
                              tables: PilotData, *, init_seeds: dict[str, int] | None = None,
                              quiet: bool = False) -> dict[str, Any]:
    """Train the same segments placed on the bank (no cut, pooled columns) and score the same test customers, with
    the bank's torch threads and a progress bar (unless ``quiet``)."""
    from vsplit.config.recipe import recipe_settings
    from vsplit.estimator import SplitClassifier
    from vsplit.evaluation import shared_test_views
    from vsplit.runtime.progress import TqdmProgress
    from vsplit.runtime.threads import torch_threads

    report = json.loads((run_dir / "bank" / "report.json").read_text())
    # the split's own model, optimizer, training and preprocessing keys (its numeric embedding and heads too)
    sections = {k: v for part in (config.model, config.train, config.data) for k, v in dataclasses.asdict(part).items()}
    params = {k: sections[k] for k in SplitClassifier._get_param_names()
              if k in sections and k not in ("categorical", "local_steps", "pipeline_window", "label", "id_column",
                                             "positive_label")}
    # the values a config leaves to the run resolved as the split's party resolved them (model.dropout left out)
    params.update({k: v for k, v in recipe_settings(config).items() if k in params})
    began = time.perf_counter()
    bar = TqdmProgress(desc="pooled baseline training (no cut)", disable=quiet)
    # the party processes' threads (train.threads, 1 by default): torch's default of one per core slowed this
    # baseline 27 times on a busy 2-core machine, the parties 1.1 times (vsplit.runtime.threads)
    with torch_threads(config.train.threads):
        clf = SplitClassifier(
            label_party="bank", label=data.label, id_column=data.id_column, positive_label=data.positive_label,
            mode="centralized", **params, random_state=config.train.seed, init_seeds=init_seeds, alignment="join",
            topology=spec.kind,
            server=next((p for p, r in spec.roles if r == "compute"), "server"), callbacks=[bar],
        ).fit(tables.train)
        bar.close()
        metrics = clf.evaluate(shared_test_views(tables.test, label_party="bank", id_column=data.id_column))
    report["baselines"]["centralized"] = metrics
    report["seconds"]["centralized_baseline"] = round(time.perf_counter() - began, 3)
    return report

