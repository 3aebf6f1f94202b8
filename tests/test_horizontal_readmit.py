"""A bank lost mid-run comes back: restarted with --resume it is readmitted at the next round and ends with the rest.

The process test runs four banks, a server and a separate federated server as OS processes over mutual TLS (SplitFed
v1, secure aggregation on); bank_3 is killed once the server has finished round 1 and restarted at once with
``--resume``. The machine tests drive the readmission book and the stage wrapper directly.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests._pilot_support import start
from tests.test_horizontal_processes import _segments
from vsplit.config.load import tomllib  # tomllib, or tomli on Python 3.10
from vsplit.federated.secure_agg import SecAggConfig, SecAggServer
from vsplit.horizontal.averages import average
from vsplit.horizontal.machines import Aggregate, Hub
from vsplit.horizontal.messages import SegmentState
from vsplit.horizontal.readmit import (
    Admitting,
    AwaitReady,
    Readmission,
    Ready,
    federated_take,
    server_take,
)
from vsplit.pilot.horizontal import prepare_horizontal
from vsplit.protocol.abort import Abort


def _connects_to(pid: int, port: int) -> bool:
    """Whether process ``pid`` has a TCP socket to 127.0.0.1:``port`` (from /proc, Linux)."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in table:
        fields = line.split()
        if int(fields[2].rpartition(":")[2], 16) == port and f"socket:[{fields[9]}]" in inodes:
            return True
    return False


def _state(round_: int, value: float, rows: int = 1) -> SegmentState:
    return SegmentState.pack(round=round_, rows=rows, arrays={"w/x": np.array([value], np.float32)})


def test_a_returned_client_is_admitted_from_the_next_round_and_gets_that_rounds_average() -> None:
    book = Readmission(gone=set(), rounds=10, joins_now=True)  # a FedAvg server: it averages, trains nothing
    logs: list[str] = []
    # a stand-in for the join: what the check accepts; the answer is what ``roster`` builds for the first round
    take = server_take(book, check=lambda c, m: None if isinstance(m, Ready) else "not its join",
                       roster=lambda start: Ready(round=start), log=logs.append)
    agg = Aggregate({"a": 1, "b": 2, "c": 3}, round=4, average=average, reserve={"a": 1, "b": 2, "c": 3})
    stage = Admitting(agg, book, 4, take)
    stage.receive("b", _state(4, 2.0, rows=2))
    assert stage.returned("b") == [] and "b" in book.gone  # b's old process had sent its state: it stays in
    assert stage.expects("b") and not agg.expects("b")
    assert [(o.to, o.message) for o in stage.receive("b", Ready(round=9))] == [("b", Ready(round=5))]
    assert book.admitted == {"b": 5} and not stage.expects("b")
    stage.receive("a", _state(4, 1.0))
    out = stage.receive("c", _state(4, 4.0, rows=3))
    assert agg.done and sorted(o.to for o in out) == ["a", "c"]  # the average is not sent to b's old process
    caught = book.catch_ups(4, _state(4, float(agg.result["w/x"][0]), rows=6))
    assert [o.to for o in caught] == ["b"] and book.back == {"b": 5} and "b" not in book.gone
    assert book.catch_ups(4, caught[0].message) == []  # once


def test_a_client_whose_join_differs_is_refused_with_a_code_only() -> None:
    book = Readmission(gone={"b"}, rounds=10, joins_now=False)
    logs: list[str] = []
    take = server_take(book, check=lambda c, m: "its public differs from the run's", roster=lambda s: Ready(round=s),
                       log=logs.append)
    hub = Hub({"a": AwaitReady([], 3)})
    stage = Admitting(hub, book, 3, take)
    out = stage.receive("b", Ready(round=1))
    assert [type(o.message) for o in out] == [Abort] and "public" in logs[0] and "b" in book.refused
    assert not stage.expects("b") and book.admitted == {}
    last = Readmission(gone={"b"}, rounds=10, joins_now=False)  # in the last round nothing is left to train
    final = Admitting(AwaitReady([], 9), last, 9, server_take(last, check=lambda c, m: None,
                                                             roster=lambda s: Ready(round=s), log=logs.append))
    assert [type(o.message) for o in final.receive("b", Ready(round=1))] == [Abort] and "last round" in logs[-1]


def test_the_federated_server_admits_into_an_aggregation_still_collecting_keys_or_from_a_later_round() -> None:
    book = Readmission(gone={"c"}, rounds=10, joins_now=True)
    book.last = (2, _state(2, 7.0))

    class Forwarded:  # the roster a returned client forwards: start_round is what the federated server reads
        def __init__(self, start_round: int) -> None:
            self.start_round = start_round

    take = federated_take(book, check=lambda c, m: None, log=lambda text: None)
    config = SecAggConfig(run_id="r", round=3, clients=("a", "b", "c", "d"), length=4, server="fed")
    server = SecAggServer(config)
    server.drop("c")
    stage = Admitting(server, book, 3, take)
    out = stage.receive("c", Forwarded(3))  # type: ignore[arg-type]
    assert [o.to for o in out] == ["c"] and out[0].message.round == 2  # the average of round 2 at once
    assert server.alive == ["a", "b", "c", "d"] and "c" not in book.gone and book.back == {"c": 3}
    for first, admitted in ((4, {"c": 4}), (2, {})):  # pending for a later round; a round already averaged: no
        later = Readmission(gone={"c"}, rounds=10, joins_now=True)
        collecting = SecAggServer(config)
        collecting.drop("c")
        out = Admitting(collecting, later, 3, federated_take(later, check=lambda c, m: None, log=lambda text: None)
                        ).receive("c", Forwarded(first))  # type: ignore[arg-type]
        assert later.admitted == admitted and "c" in later.gone and "c" not in collecting.alive
        assert [type(o.message) for o in out] == ([] if admitted else [Abort])


def test_the_server_waits_for_ready_and_a_client_lost_again_stays_out() -> None:
    wait = AwaitReady(["b", "c"], 5)
    assert wait.expects("b") and not wait.done
    wait.receive("b", Ready(round=5))
    wait.drop("c")
    assert wait.done and wait.ready == ["b"] and wait.dropped == ["c"]
    with pytest.raises(Exception, match="not expected"):
        AwaitReady(["b"], 5).receive("b", Ready(round=4))


CASES = {  # schedule, separate federated server
    "splitfed_v1_federated_server_secure": ({"kind": "splitfed_v1"}, True),
    "splitfed_v2_server_averages_in_clear": ({"kind": "splitfed_v2", "secure_aggregation": "off"}, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bank_killed_mid_run_and_restarted_with_resume_is_readmitted_and_ends_with_the_others(
        tmp_path: Path, case: str) -> None:
    schedule, federated = CASES[case]
    run_id = "readmit"
    rounds = 20
    configs = prepare_horizontal(tmp_path, banks=4, run_id=run_id, rows=120, federated=federated,
                                 schedule=schedule, train={"epochs": rounds, "batch_size": 24})
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    short = ["--set", "network.reconnect_timeout_s=1"]  # the server gives the killed process up after 1 s
    procs = {p: start(["run", "--config", str(c), "--quiet", *short], log=logs[p]) for p, c in configs.items()}
    mark = tmp_path / "runs" / run_id / "server" / "checkpoints" / "round-0001.npz"
    deadline = time.monotonic() + 90
    while not mark.exists() and time.monotonic() < deadline and procs["bank_3"].poll() is None:
        time.sleep(0.005)
    procs["bank_3"].send_signal(signal.SIGKILL)
    assert procs["bank_3"].wait(timeout=30) == -signal.SIGKILL
    # the server (and so the run) pauses until the new process has connected, so that it comes back mid-run
    # however long a process takes to start here
    procs["server"].send_signal(signal.SIGSTOP)
    again = tmp_path / "bank_3.again.log"
    try:
        procs["bank_3"] = start(["run", "--config", str(configs["bank_3"]), "--quiet", "--resume", *short], log=again)
        port = int(tomllib.loads(configs["server"].read_text())["network"]["listen"].rpartition(":")[2])
        deadline = time.monotonic() + 60
        while not _connects_to(procs["bank_3"].pid, port) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        procs["server"].send_signal(signal.SIGCONT)
    logs["bank_3"] = again
    codes = {p: proc.wait(timeout=150) for p, proc in procs.items()}
    assert all(code == 0 for code in codes.values()), {p: logs[p].read_text()[-1500:] for p in codes}
    run_dir = tmp_path / "runs" / run_id
    server = json.loads((run_dir / "server" / "result.json").read_text())
    bank = json.loads((run_dir / "bank_3" / "result.json").read_text())
    back = server["readmitted"].get("bank_3")
    assert back is not None and 2 <= back < rounds, server
    assert bank["readmitted"] == {"bank_3": back} and "bank_3" in server["lost"]
    if federated:
        fed = json.loads((run_dir / "fedserver" / "result.json").read_text())
        assert fed["readmitted"] == {"bank_3": back} and fed["secure_aggregation"]
    trained = {r["round"] for r in server["history"] if r["client"] == "bank_3"}
    others = {r["round"] for r in server["history"] if r["client"] == "bank_1"}
    assert others == set(range(rounds))
    assert set(range(back, rounds)) <= trained and (back - 1) not in trained  # out for a while, then in again
    # every bank, bank_3 included, holds the last round's average of the client segments
    one, three = _segments(tmp_path, run_id, "bank_1"), _segments(tmp_path, run_id, "bank_3")
    assert one and all(torch.equal(one[k], three[k]) for k in one)
