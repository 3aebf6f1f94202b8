"""Scoring a trained run every day: each ``vsplit predict`` is its own job, as three OS processes over mutual TLS;
and early stopping on the metric a config names (``train.monitor``).

One run is trained once (a bank and two partners, hand-written configs). Then, as a daily batch would: a job on
some customers, a job on every customer killed mid-PSI, a job on a disjoint set while the killed one is still
unfinished, and the killed job resumed with ``--resume --job`` (it overlaps the other two). Every job writes only
its own folder, and a customer gets the same probability in every job that scores it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from _pilot_support import free_port, kill_after_buckets, start, wait_all
from _plain import PLAIN_SET
from _three_party_support import prepare_three_parties

from vsplit.cli.main import main

EPOCHS = 3
TRAIN = f"[train]\nepochs = {EPOCHS}\nbatch_size = 256\npatience = 100\nmonitor = \"val_loss\"\n\n[psi]\nbuckets = 16\n"
RUN = "daily"
#: no partner runs these: the bank tells it why it stops (vsplit.node.early) within 1 s, not its connect timeout
ALONE = ["--set", "network.connect_timeout_s=1"]


def _predict(root: Path, configs: dict[str, Path], job: str, ids: list[str] | None, *, tables: dict[str, Path],
             resume: bool = False):
    logs = {p: root / f"{p}-{job}{'-resumed' if resume else ''}.log" for p in configs}
    procs = {}
    for party, config in configs.items():
        args = ["predict", "--config", str(config), "--quiet", "--job", job, "--input", str(tables[party]),
                "--set", "network.reconnect_timeout_s=2"]
        if resume:
            args.append("--resume")
        if party == "bank" and ids is not None:
            path = root / f"ids-{job}.csv"
            pd.DataFrame({"customer_id": ids}).to_csv(path, index=False)
            args += ["--ids", str(path)]
        procs[party] = start(args, log=logs[party])
    return procs, logs


def _scores(run: Path, job: str) -> pd.Series:
    table = pd.read_csv(run / "bank" / "predictions" / job / "predictions.csv", dtype={"customer_id": str})
    scored = table[table["status"] == "scored"]
    return scored.set_index("customer_id")["probability"]


def _grown(root: Path, configs: dict[str, Path]) -> dict[str, Path]:
    """Each party's test table four times over (new IDs, the same overlap): a PSI long enough to be killed."""
    tables = {}
    for party, config in configs.items():
        table = pd.read_parquet(config.parent / "data" / "test.parquet")
        copies = [table.assign(customer_id=table["customer_id"].astype(str) + f"-{i}") for i in range(4)]
        tables[party] = root / f"{party}-to-score.parquet"
        pd.concat(copies, ignore_index=True).to_parquet(tables[party], index=False)
    return tables


def test_predict_jobs_in_a_row_and_a_killed_job_resumed_never_touch_each_other(tmp_path, capsys):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id=RUN, extra=TRAIN)
    logs = {p: tmp_path / f"{p}-train.log" for p in configs}
    wait_all({p: start(["train", "--config", str(c), "--quiet", "--set", "data.test_path="], log=logs[p])
              for p, c in configs.items()}, logs, timeout=180)
    run = tmp_path / "runs" / RUN
    trained = json.loads((run / "bank" / "result.json").read_text())  # early stopping watched the loss
    losses = [h["val_loss"] for h in trained["history"]]
    assert len(losses) == EPOCHS and trained["best_epoch"] == losses.index(min(losses))
    report = (run / "bank" / "report.md").read_text()  # no test set: the validation history is the quality section
    assert "## Training (validation history)" in report and "No test set was configured" in report
    assert f"Chosen epoch: {trained['best_epoch'] + 1} (of {EPOCHS} run)" in report and f"| {EPOCHS} |" in report
    tables = _grown(tmp_path, configs)
    every = pd.read_parquet(tables["bank"])["customer_id"].astype(str).tolist()

    first, disjoint = every[:300], every[900:1100]
    procs, logs = _predict(tmp_path, configs, "day-1", first, tables=tables)
    wait_all(procs, logs, timeout=90)
    day1 = (run / "bank" / "predictions" / "day-1" / "predictions.csv").read_bytes()

    # a job over every customer, killed once the shop's PSI with the bank has finished two buckets
    procs, logs = _predict(tmp_path, configs, "day-3", None, tables=tables)
    state = run / "shop" / "predictions" / "day-3" / "psi-state" / "bank" / "state.json"
    kill_after_buckets(procs["shop"], state, logs["shop"], buckets=2, timeout=90)
    for party in ("bank", "telco"):
        assert procs[party].wait(timeout=60) != 0, logs[party].read_text()[-2000:]
    procs["shop"].wait(timeout=10)
    assert not (run / "bank" / "predictions" / "day-3" / "predictions.csv").exists()
    assert json.loads(state.read_text())["done"] < 16  # killed part-way

    # another job runs while day-3 is unfinished, and day-3 resumes from the buckets both sides finished
    procs, logs = _predict(tmp_path, configs, "day-4", disjoint, tables=tables)
    wait_all(procs, logs, timeout=90)
    procs, logs = _predict(tmp_path, configs, "day-3", None, tables=tables, resume=True)
    wait_all(procs, logs, timeout=120)

    scores = {job: _scores(run, job) for job in ("day-1", "day-3", "day-4")}
    assert set(scores["day-1"].index) <= set(first) and set(scores["day-4"].index) <= set(disjoint)
    assert len(scores["day-1"]) > 150 and len(scores["day-4"]) > 100
    assert set(scores["day-3"].index) >= set(scores["day-1"].index) | set(scores["day-4"].index)
    for job in ("day-1", "day-4"):  # the same customer, the same probability, in every job (to float32
        shared = scores[job].index  # rounding: a row's batch-mates change the order of the kernels' sums)
        pd.testing.assert_series_equal(scores[job], scores["day-3"].loc[shared], check_exact=False, rtol=0,
                                       atol=1e-6)
    assert (run / "bank" / "predictions" / "day-1" / "predictions.csv").read_bytes() == day1  # not overwritten
    resumed = json.loads((run / "shop" / "predictions" / "day-3" / "predict.json").read_text())
    assert resumed["job"] == "day-3" and resumed["resumed"] is True
    assert resumed["psi"]["resumed_buckets"]["bank"] >= 2
    for party in configs:  # a finished job keeps no PSI progress
        assert not list((run / party / "predictions").glob("*/psi-state")), party

    # a job ID is used once; --resume names a job that is unfinished
    bank = ["predict", "--config", str(configs["bank"]), "--job", "day-1", "--input", str(tables["bank"]), *ALONE]
    assert main(bank) == 1 and "already ran" in capsys.readouterr().err
    assert main([*bank, "--resume"]) == 1 and "this job finished" in capsys.readouterr().err


def test_paths_on_the_command_line_are_from_the_current_folder_and_errors_name_the_option(tmp_path, monkeypatch,
                                                                                          capsys):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="paths", extra=TRAIN)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["predict", "--config", str(configs["bank"]), "--input", "data/test.parquet", "--job", "x",
                 *ALONE]) == 1
    err = capsys.readouterr().err
    assert "--input data/test.parquet: no such file" in err and str(elsewhere) in err
    assert not (tmp_path / "runs" / "paths" / "bank" / "predictions" / "x").exists()  # nothing claimed
    (elsewhere / "ids.csv").write_text("customer_id\n1\n")
    table = str(configs["bank"].parent / "data" / "test.parquet")
    assert main(["predict", "--config", str(configs["bank"]), "--input", table, "--ids", "ids.csv", "--job", "y",
                 *ALONE]) == 1
    err = capsys.readouterr().err  # the inputs were found (ids.csv from the current folder): the model is missing
    assert "model.npz" in err and "no such file" not in err
    bad = configs["bank"].read_text().replace('test_path = "data/test.parquet"', 'test_path = "data/nope.parquet"')
    configs["bank"].write_text(bad)
    from vsplit.config import load_config
    from vsplit.errors import DataError
    from vsplit.node import PartyNode

    with pytest.raises(DataError, match=r"data.test_path in the party config"):
        PartyNode(load_config(configs["bank"]), progress=False)._test_table()


@pytest.mark.parametrize("monitor", ["val_loss", "val_auc"])
def test_early_stopping_keeps_the_best_epoch_of_the_monitored_metric(tmp_path, monitor):
    import threading

    from vsplit.config import load_config
    from vsplit.datasets import preset
    from vsplit.node import PartyNode
    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.prepare import export_tables
    from vsplit.transport.memory import memory_pair

    data = preset("secretflow_bank")
    write_missing_configs(tmp_path, label=data.label, positive_label=data.positive_label)
    export_tables(data, tmp_path)
    # at this rate the validation loss bottoms out (epoch 6) before the AUC peaks (epoch 8): the monitors differ
    # initial weights from train.seed, not the parties' secrets: the curves the comment above describes
    common = [f"output.run_id={monitor}", "train.epochs=8", "train.lr=0.01", "train.patience=100",
              f'train.monitor="{monitor}"', 'train.init_seed="seed"']
    # the plain network: this checks which epoch each monitor keeps, not the recipe
    nodes = {p: PartyNode(load_config(tmp_path / p / "party.toml", overrides=[*PLAIN_SET, *common], check_files=False),
                          progress=False) for p in ("bank", "partner")}
    bank_end, partner_end = memory_pair()
    worker = threading.Thread(target=lambda: nodes["partner"].run({"bank": partner_end}))
    worker.start()
    result = nodes["bank"].run({"partner": bank_end})
    worker.join(timeout=120)
    losses, aucs = [h["val_loss"] for h in result.history], [h["val_auc"] for h in result.history]
    lowest_loss, highest_auc = losses.index(min(losses)), aucs.index(max(aucs))
    assert lowest_loss != highest_auc  # else this test could not tell the monitors apart
    best = lowest_loss if monitor == "val_loss" else highest_auc
    assert result.best_epoch == best
    report = json.loads((nodes["bank"].folder / "report.json").read_text())
    assert report["monitor"] == monitor and report["best_epoch"] == best
    alone = report["baselines"]["label_party_only"]  # the bank's network carries the loss the report's warning
    assert ("val_loss" in alone) == (alone["model"] == "network")  # compares with; its regression has no epochs
    assert f"Chosen epoch: {best + 1} (of 8 run), by {monitor}" in (nodes["bank"].folder / "report.md").read_text()


def test_a_chosen_epoch_worse_than_the_bank_alone_is_a_warning_in_the_report():
    from vsplit.node.aligned import training_warnings

    history = [{"epoch": 0, "val_loss": 0.70}, {"epoch": 1, "val_loss": 0.64}]
    assert training_warnings(history, 1, {"label_party_only": {"val_loss": 0.70}}) == []
    warned = training_warnings(history, 1, {"label_party_only": {"val_loss": 0.31}})
    assert len(warned) == 1 and "epoch (2)" in warned[0] and "0.3100" in warned[0]
    assert training_warnings(history, 1, {}) == []  # no baseline trained: nothing to compare with


def test_a_monitor_the_task_has_not_is_refused_naming_the_key(tmp_path):
    from vsplit.config import load_config
    from vsplit.datasets import preset
    from vsplit.errors import ConfigError
    from vsplit.pilot.configs import write_missing_configs

    data = preset("secretflow_bank")
    write_missing_configs(tmp_path, label=data.label, positive_label=data.positive_label)
    with pytest.raises(ConfigError, match=r"train.monitor: must be auto, val_loss or val_auc"):
        load_config(tmp_path / "bank" / "party.toml", overrides=['train.monitor="val_rmse"'], check_files=False)
