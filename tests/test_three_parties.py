"""A bank and two partners: a partner that finishes first is no error, a partner that vanishes stops the others.
The first test also runs the bank and telco with ``[data] stream = true`` (tables read per batch, never whole).

The process tests take the path a new user takes from docs/pilot.md: three OS processes over mutual TLS with
hand-written configs. The partners finish scoring before the bank does (they only send embeddings), close their
channels and exit while the bank still waits for the other partner's embeddings. The pump tests pin the rule itself
over in-memory channels.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import pandas as pd
import pytest
from _first_hour_support import check_coverage, check_credit_report, check_every_customer_scored, check_train_output
from _pilot_support import free_port, start, wait_all
from _three_party_support import COLUMNS, PARTNERS, prepare_three_parties

from vsplit.cli.main import main
from vsplit.errors import RemoteAbort, TransportError
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message
from vsplit.runtime.checkpoint import load_checkpoint
from vsplit.runtime.pump import Pump
from vsplit.transport import codec
from vsplit.transport.channel import PeerLost
from vsplit.transport.memory import memory_pair

TRAIN = "[train]\nepochs = {epochs}\nbatch_size = {batch}\npatience = 100\n"
SESSION = b"three-parties-01"
#: Message types of the hello and of PSI: what a party exchanges before any training.
SETUP_MESSAGES = {"Hello", "Blinded", "Doubled", "Selected", "Ready"}


def _launch(root, configs, command: list[str], tag: str, extra: dict[str, list[str]] | None = None):
    logs = {p: root / f"{p}-{tag}.log" for p in configs}
    procs = {p: start([*command, "--config", str(c), "--quiet", *(extra or {}).get(p, [])], log=logs[p])
             for p, c in configs.items()}
    return procs, logs


# -- three processes over mutual TLS ---------------------------------------------------------------------------------


def test_bank_and_two_partners_train_score_and_predict_though_partners_finish_first(tmp_path):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="trio", extra=TRAIN.format(epochs=1, batch=256))
    stream = ["--set", "data.stream=true"]  # bank and telco train from their Parquet files without reading them whole
    procs, logs = _launch(tmp_path, configs, ["train"], "train", extra={"bank": stream, "telco": [*stream, "--json"]})
    wait_all(procs, logs, timeout=180)  # exit 0 for all three: the partners that closed first are no error
    check_train_output(logs["bank"].read_text(), logs["telco"].read_text(), party="telco")

    run = tmp_path / "runs" / "trio"
    report = json.loads((run / "bank" / "report.json").read_text())
    assert 0.5 < report["metrics"]["auc"] <= 1.0
    assert report["metrics"]["n_scored"] == report["psi"]["test"]["intersection"] > 0
    assert set(report["psi"]["train"]["peer_sizes"]) == set(PARTNERS)
    bank_test = pd.read_parquet(tmp_path / "bank" / "data" / "test.parquet")
    markdown = (run / "bank" / "report.md").read_text()
    check_coverage(report, markdown)
    page = (run / "bank" / "report.html").read_text()
    check_credit_report(report, int((bank_test["y"] == "yes").sum()), markdown, page)
    own = (run / "bank" / "report.json").read_bytes()
    assert main(["report", "--run", str(run), "--check"]) == 0  # merges each partner's own report.json
    assert (run / "bank" / "report.json").read_bytes() == own  # the bank's own record is never rewritten
    report = json.loads((run / "bank" / "report-merged.json").read_text())
    assert set(report["communication"]) == set(COLUMNS)
    for partner in PARTNERS:  # each partner trained: it sent (embeddings) and received (gradients) beyond PSI
        for direction in ("sent", "received"):
            training = set(report["communication"][partner][direction]) - SETUP_MESSAGES
            assert training, (partner, direction, report["communication"][partner])
    assert all(f"### {party}" in (run / "bank" / "report.md").read_text() for party in COLUMNS)

    ids = tmp_path / "ids.csv"
    pd.read_parquet(tmp_path / "bank" / "data" / "test.parquet")[["customer_id"]].head(300).to_csv(ids, index=False)
    inputs = {p: ["--input", str(tmp_path / p / "data" / "test.parquet")] for p in configs}
    inputs["bank"] += ["--ids", str(ids)]
    procs, logs = _launch(tmp_path, configs, ["predict", "--job", "first"], "predict", inputs)
    wait_all(procs, logs, timeout=60)
    check_every_customer_scored(run / "bank" / "predictions" / "first" / "predictions.csv", 300,
                                logs["bank"].read_text())
    predictions = pd.read_csv(run / "bank" / "predictions" / "first" / "predictions.csv")
    assert len(predictions) == 300
    scored = predictions[predictions["status"] == "scored"]
    assert len(scored) > 150 and scored["probability"].between(0, 1).all()
    assert set(predictions["status"]) <= {"scored", "unknown to a partner"}


def test_partner_killed_mid_training_stops_the_others_with_an_error_naming_it(tmp_path):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="drop",
                                    extra=TRAIN.format(epochs=40, batch=64))
    short = ["--set", "network.reconnect_timeout_s=2"]  # a killed process never comes back: give up after 2 s
    procs, logs = _launch(tmp_path, configs, ["train"], "train", extra=dict.fromkeys(configs, short))
    run = tmp_path / "runs" / "drop"
    deadline = time.monotonic() + 90
    while not (run / "telco" / "checkpoints" / "epoch-0000.npz").exists():
        assert time.monotonic() < deadline, logs["telco"].read_text()[-2000:]
        assert all(p.poll() is None for p in procs.values()), {p: logs[p].read_text()[-500:] for p in procs}
        time.sleep(0.02)
    procs["telco"].kill()  # SIGKILL: no abort, no TLS close
    killed = time.monotonic()
    for party in ("bank", "shop"):
        try:
            code = procs[party].wait(timeout=30)
        except Exception:
            for p in procs.values():
                p.kill()
            raise AssertionError(f"{party} still runs 30 s after telco was killed") from None
        assert code == 1, logs[party].read_text()[-2000:]
    assert time.monotonic() - killed < 30
    bank, shop = logs["bank"].read_text(), logs["shop"].read_text()
    assert "Traceback" not in bank + shop
    error = [line for line in bank.splitlines() if line.startswith("vsplit: error:")]
    assert error and "'telco'" in error[0] and ("dropped" in error[0] or "failed" in error[0]), bank
    assert "vsplit: error: bank aborted: another party of the session dropped out" in shop, shop
    for party in COLUMNS:  # whatever the kill interrupted, every checkpoint left behind loads
        found = sorted((run / party / "checkpoints").glob("epoch-*.npz"))
        assert found, party
        for path in found:
            assert load_checkpoint(path, run_id="drop", party=party)["epoch"] == int(path.stem.split("-")[1])


# -- the rule, over in-memory channels -------------------------------------------------------------------------------


@message(0x7E31)
@dataclass(frozen=True)
class Part(Message):
    """A test message: one partner's share."""

    value: int


class Gather:
    """The hub: done once every partner has sent one :class:`Part`; ``declares`` adds the optional ``expects``."""

    def __init__(self, partners: list[str], *, declares: bool) -> None:
        self.missing, self.done, self.result = set(partners), False, None
        if declares:
            self.expects = lambda peer: peer in self.missing

    def start(self) -> list[Outgoing]:
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        self.missing.discard(sender)
        self.done = not self.missing
        return []


def _hub() -> tuple[Pump, dict]:
    ends = {p: memory_pair() for p in PARTNERS}
    return Pump("bank", {p: hub for p, (hub, _) in ends.items()}, session=SESSION), {p: e for p, (_, e) in ends.items()}


def _send_part(end, seq: int = 0) -> None:
    end.send(codec.encode(Part(value=1), session=SESSION, seq=seq))


def _poll_all(pump: Pump, rounds: int = 6) -> None:
    for _ in range(rounds):
        pump.poll()


@pytest.mark.parametrize("declares", [True, False], ids=["machine-with-expects", "machine-without-expects"])
def test_partner_that_sent_its_part_and_closed_does_not_fail_the_hub(declares):
    pump, partners = _hub()
    machine = Gather(list(PARTNERS), declares=declares)
    pump.begin(machine)
    _send_part(partners["shop"])
    partners["shop"].close()  # shop is done: its part, then a clean close
    _poll_all(pump)
    assert pump.closed == ["shop"] and not machine.done
    _send_part(partners["telco"])
    _poll_all(pump)
    assert machine.done


def test_partner_that_closes_while_the_hub_expects_it_fails_at_once_and_the_others_learn_a_code():
    pump, partners = _hub()
    pump.begin(Gather(list(PARTNERS), declares=True))
    partners["shop"].close()  # before sending its part
    with pytest.raises(PeerLost, match="'shop' closed the channel while this party still expected"):
        _poll_all(pump)
    abort = codec.decode(partners["telco"].recv(timeout=1))[1]
    assert isinstance(abort, Abort) and abort.code == AbortCode.PEER_LOST


def test_machine_without_expects_fails_once_no_open_peer_is_left():
    pump, partners = _hub()
    pump.begin(Gather(list(PARTNERS), declares=False))
    partners["shop"].close()
    _poll_all(pump)  # it cannot tell yet whether it needed shop: telco might still send everything
    partners["telco"].close()
    with pytest.raises(PeerLost, match="'shop', 'telco' closed the channel while this party still expected"):
        _poll_all(pump)


def test_hub_timeout_names_the_partner_that_closed_early():
    pump, partners = _hub()
    pump.timeout = 0.2
    sent = []
    pump.taps.append(lambda sender, to, msg, frame: sent.append((to, type(msg).__name__)))
    partners["shop"].close()
    with pytest.raises(TransportError, match=r"no message from any peer within 0.2 s; 'shop' closed the channel"):
        pump.run(Gather(list(PARTNERS), declares=False))
    assert sent == [("telco", "Abort")]  # the abort goes to the peers still open only


def test_partner_learns_the_hub_aborted_because_another_partner_dropped():
    pump, partners = _hub()
    pump.abort(AbortCode.PEER_LOST)
    shop = Pump("shop", {"bank": partners["shop"]}, session=SESSION, timeout=1)
    with pytest.raises(RemoteAbort, match=r"bank aborted: another party of the session dropped out .*\(code 11\)"):
        shop.run(Gather(["bank"], declares=True))


# -- three nodes in one process --------------------------------------------------------------------------------------


def test_partner_failing_between_protocols_tells_the_hub_which_tells_the_other_partner(tmp_path):
    from vsplit.config import load_config
    from vsplit.node import PartyNode

    prepare_three_parties(tmp_path, port=free_port(), run_id="early", extra=TRAIN.format(epochs=1, batch=256))
    common = ["network.read_timeout_s=20"]
    overrides = {"bank": common, "shop": common, "telco": [*common, 'data.test_path="data/missing.parquet"']}
    nodes = {p: PartyNode(load_config(tmp_path / p / "party.toml", overrides=overrides[p], check_files=False),
                          progress=False) for p in COLUMNS}
    links = {p: memory_pair() for p in PARTNERS}
    channels = {"bank": {p: hub for p, (hub, _) in links.items()}}
    channels.update({p: {"bank": end} for p, (_, end) in links.items()})
    errors: dict[str, BaseException] = {}

    def run(party: str) -> None:
        try:
            nodes[party].run(channels[party])
        except Exception as exc:  # collected and checked below
            errors[party] = exc

    threads = {p: threading.Thread(target=run, args=(p,)) for p in COLUMNS}
    started = time.monotonic()
    for thread in threads.values():
        thread.start()
    for thread in threads.values():
        thread.join(timeout=60)
    assert time.monotonic() - started < 15, "the others waited for a read timeout instead of hearing the abort"
    assert "missing.parquet" in str(errors["telco"])
    assert isinstance(errors["bank"], RemoteAbort) and str(errors["bank"]).startswith("telco aborted")
    assert isinstance(errors["shop"], RemoteAbort) and str(errors["shop"]).startswith("bank aborted")


def test_a_partner_a_stage_ahead_waits_for_that_stage_when_the_pump_holds():
    """A partner done with one stage (its scorecard card sent) starts the next (the test table's PSI) while the hub
    still waits for another partner: its next frame must wait in its channel, not reach the current machine."""
    ends = {p: memory_pair() for p in PARTNERS}
    pump = Pump("bank", {p: hub for p, (hub, _) in ends.items()}, session=SESSION, hold=True)
    first, second = Gather(list(PARTNERS), declares=True), Gather(list(PARTNERS), declares=True)
    seen: list[str] = []
    first.receive = lambda sender, msg, g=first: (seen.append(f"first:{sender}"), Gather.receive(g, sender, msg))[1]
    pump.begin(first)
    _send_part(ends["shop"][1], 0)
    _send_part(ends["shop"][1], 1)  # shop is already in the next stage
    _poll_all(pump)
    assert seen == ["first:shop"] and not first.done  # the second frame was held, not fed to the first stage
    _send_part(ends["telco"][1], 0)
    _poll_all(pump)
    assert first.done
    pump.begin(second)
    _poll_all(pump)
    assert second.missing == {"telco"}  # shop's held frame reached the stage it belongs to


def test_the_scorecard_node_holds_frames_of_a_later_stage():
    from vsplit.node.scorecard import ScorecardNode

    assert ScorecardNode.pump_options(None)["hold"] is True  # type: ignore[arg-type]
