"""A labelled test table set at the bank only (as docs/pilot.md shows it): the partner scores the test customers from
the table it trained on, as two OS processes over mutual TLS; a test table at the partner only is left unscored."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from _pilot_support import free_port, start, wait_all, write_configs

from vsplit.datasets import preset
from vsplit.pilot.prepare import prepare_preset

EPOCHS = "[train]\nepochs = 2\n"


@pytest.fixture(scope="module")
def bank_data():
    return preset("secretflow_bank", seed=0)


def _run(root, data, *, drop_test_path: str, run_id: str) -> dict:
    prepare_preset(data, root)
    configs = write_configs(root, port=free_port(), run_id=run_id, extra=EPOCHS)
    path = configs[drop_test_path]
    path.write_text(path.read_text().replace('test_path = "data/test.parquet"\n', ""))
    logs = {p: root / f"{p}.log" for p in configs}
    procs = {p: start(["train", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=240)
    return {p: logs[p].read_text() for p in configs}


def test_partner_without_test_path_scores_the_banks_test_customers_from_its_own_table(tmp_path, bank_data):
    """The partner's table holds old and new customers alike (docs/pilot.md) but 10 % of the test customers are
    unknown to it: the bank's test metrics cover exactly the test customers the partner knows, the others get the
    bank's own model, and nothing fails after training."""
    test = bank_data.test["partner"]
    known = test.sample(frac=0.9, random_state=0)
    partner_table = pd.concat([bank_data.train["partner"], known], ignore_index=True)
    logs = _run(tmp_path, _Tables(bank_data, partner_table), drop_test_path="partner", run_id="bank-test-only")

    runs = tmp_path / "runs" / "bank-test-only"
    bank = json.loads((runs / "bank" / "result.json").read_text())
    partner = json.loads((runs / "partner" / "result.json").read_text())
    assert bank["test"] is not None, logs["bank"][-2000:]
    assert bank["test"]["n_scored"] == len(known) == bank["psi"]["test"]["intersection"]
    assert partner["psi"]["test"]["intersection"] == len(known)
    assert bank["test"]["auc"] > 0.6  # a real model, scored on the partner's rows of those customers
    assert "from data.path" in (runs / "partner" / "log.txt").read_text()
    assert (runs / "bank" / "report.md").is_file()


def test_test_path_at_the_partner_only_is_left_unscored_with_a_warning(tmp_path, bank_data):
    """The bank holds the test labels: without its data.test_path nothing is scored, and the partner says why
    instead of waiting for a scoring that never comes."""
    logs = _run(tmp_path, bank_data, drop_test_path="bank", run_id="partner-test-only")
    runs = tmp_path / "runs" / "partner-test-only"
    assert json.loads((runs / "bank" / "result.json").read_text())["test"] is None
    assert "test" not in json.loads((runs / "partner" / "result.json").read_text())["psi"]
    assert "data.test_path is not scored" in logs["partner"] + (runs / "partner" / "log.txt").read_text()


class _Tables:
    """The preset with the partner's one table (its training and known test customers) and no partner test table."""

    def __init__(self, data, partner_train: pd.DataFrame) -> None:
        self.train = {**data.train, "partner": partner_train}
        self.test = {"bank": data.test["bank"]}
