"""After matching, the bank re-checks the labels it will train on: too few shared customers, or one class, stop
the run with the counts and the fix, and no model is written."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _pilot_support import free_port, start, write_configs
from conftest import make_views

from vsplit.config import load_config
from vsplit.data.shared_labels import check_shared_labels
from vsplit.errors import DataError, RemoteAbort
from vsplit.node import PartyNode
from vsplit.pilot.prepare import ensure_keys
from vsplit.transport.memory import memory_pair

CLASSES = ["not 'yes'", "'yes'"]


def check(y, **kwargs):
    options = {"task": "binary", "validation_fraction": 0.1, "min_per_class": 10, "classes": CLASSES, **kwargs}
    check_shared_labels("bank", "y", np.asarray(y, dtype=float), **options)


def test_enough_of_each_class_passes():
    check([0] * 10 + [1] * 10)
    check([0.5, 1.5] * 5, task="regression", classes=())


@pytest.mark.parametrize("y, message", [
    ([0, 0, 1], r"the 3 shared customers have label 'y' not 'yes' 2 times, 'yes' 1 time; training needs each class "
                r"at least 10 times \(train.min_class_rows\)"),
    ([0] * 50, r"the 50 shared customers all have label 'y' not 'yes' .*needs both classes"),
    ([0] * 50 + [1] * 4, r"with train.validation_fraction = 0.1 at least one of each in validation"),
])
def test_too_few_or_one_class_names_the_counts_and_the_fix(y, message):
    with pytest.raises(DataError, match=message) as err:
        check(y, min_per_class=4 if len(y) == 54 else 10)
    assert "share more customers" in str(err.value) and "lower train.min_class_rows" in str(err.value)


def test_a_regression_needs_two_distinct_values():
    with pytest.raises(DataError, match="1 distinct values of label 'y'"):
        check([3.0] * 20, task="regression", classes=())


def _prepare(root, partner):
    """The bank (600 customers, both classes) and a partner with ``partner(views)`` of them, keys and configs."""
    views = make_views(600, seed=1)
    for name, table in (("bank", views["bank"]), ("partner", partner(views))):
        (root / name / "data").mkdir(parents=True)
        table.to_parquet(root / name / "data" / "train.parquet", index=False)
    ensure_keys(root, ["bank", "partner"])
    return write_configs(root, port=free_port(), run_id=root.name, extra="[train]\nepochs = 1\n")


def test_three_shared_customers_stop_both_processes_without_a_model(tmp_path):
    configs = _prepare(tmp_path, lambda v: v["partner"][v["partner"].customer_id.isin(v["bank"].customer_id[:3])])
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    procs = {p: start(["train", "--config", str(c), "--quiet", "--set", 'data.test_path=""'], log=logs[p])
             for p, c in configs.items()}
    codes = {p: proc.wait(timeout=120) for p, proc in procs.items()}
    bank, partner = logs["bank"].read_text(), logs["partner"].read_text()
    assert codes["bank"] == 1 and codes["partner"] != 0, (codes, bank, partner)
    assert "Traceback" not in bank + partner
    assert bank.startswith("vsplit: error: bank: after matching, the 3 shared customers have label 'y'"), bank
    assert "lower train.min_class_rows" in bank and len(bank.strip().splitlines()) == 1
    assert "bank aborted" in partner and "data failed validation" in partner, partner
    assert not list((tmp_path / "runs").rglob("model.npz")) and not list((tmp_path / "runs").rglob("epoch-*"))


def test_one_class_among_the_shared_customers_stops_the_run_without_a_model(tmp_path):
    def negatives(views):
        return views["partner"][views["partner"].customer_id.isin(views["bank"].customer_id[views["bank"].y == "no"])]

    configs = _prepare(tmp_path, negatives)
    nodes = {p: PartyNode(load_config(c, overrides=['data.test_path=""']), progress=False) for p, c in configs.items()}
    bank_end, partner_end = memory_pair()
    failures = {}

    def partner():
        try:
            nodes["partner"].run({"bank": partner_end})
        except RemoteAbort as exc:
            failures["partner"] = exc

    thread = threading.Thread(target=partner)
    thread.start()
    with pytest.raises(DataError, match=r"the \d+ shared customers all have label 'y' not 'yes' .*both classes"):
        nodes["bank"].run({"partner": bank_end})
    thread.join(timeout=60)
    assert failures["partner"].code == 7  # the partner learns only "bad data"
    assert not list((tmp_path / "runs").rglob("model.npz")) and not list((tmp_path / "runs").rglob("epoch-*"))
