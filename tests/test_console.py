"""The console without a browser: its state follows a peer's connection, its server answers GET only and asks for a
token off loopback, serves only the party folder's own files by name, and a finished folder reads back."""

from __future__ import annotations

import json

import pytest

from vsplit.console.finished import find_runs, finished_snapshot
from vsplit.console.server import ConsoleSettings, Views, live_views, make_app
from vsplit.console.state import ConsoleState
from vsplit.errors import ConfigError
from vsplit.runtime.stats import CommStats


class Channel:
    """A resumable channel's face: its peer's fingerprint and its state."""

    def __init__(self) -> None:
        self.peer_fingerprint, self.state = "AB:CD", "up"


def _client(views: Views, token: str | None = None):
    from fastapi.testclient import TestClient

    return TestClient(make_app(views, token=token), base_url="http://console")


def test_a_dropped_and_restored_link_shows_reconnecting_then_connected_with_its_fingerprint():
    state = ConsoleState(party="bank", role="label", topology="vertical")
    state.expect_peers({"partner": None})
    channel, pump = Channel(), type("Pump", (), {"stats": CommStats(), "lost": [], "closed": [], "machine": None})()
    pump.stats.record("sent", "partner", "Gradients", 64)
    state.watch_run(channels={"partner": channel}, pump=pump)
    for raw, now in (("down", 2.0), ("up", 3.0)):
        channel.state = raw
        state.sample(now=now)
    snap = state.snapshot()
    (peer,) = snap["peers"]
    assert [s for _, s in peer["history"]] == ["waiting", "connected", "reconnecting", "connected"]
    assert peer["fingerprint"] == "AB:CD"
    assert snap["traffic"] == [{"peer": "partner", "direction": "sent", "type": "Gradients", "frames": 1, "bytes": 64}]
    state.finished(error=RuntimeError("boom"))
    assert state.snapshot()["status"] == "failed" and state.snapshot()["peers"][0]["state"] == "closed"


def test_the_console_answers_get_only_and_sends_no_nan():
    state = ConsoleState(party="bank", role="label", topology="vertical")
    state.on_epoch({"epoch": 0, "val_loss": float("nan")})
    with _client(live_views(state)) as client:
        assert client.get("/").status_code == 200
        assert client.get("/static/uPlot.iife.min.js").status_code == 200
        body = client.get("/api/state").text
        assert json.loads(body)["training"]["history"] == [{"epoch": 0, "val_loss": None}]
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            answer = client.request(method, "/api/state")
            assert answer.status_code == 405 and answer.json()["error"]["code"] == "read_only"
        assert client.get("/static/../server.py").status_code == 404
        answer = client.get("/")
        assert answer.headers["x-frame-options"] == "DENY" and "default-src 'self'" in \
            answer.headers["content-security-policy"]


def test_off_loopback_the_console_needs_a_token_and_takes_it_once_as_a_cookie():
    with pytest.raises(ConfigError, match=r"console\.token_file"):
        ConsoleSettings(host="0.0.0.0")
    token = "t" * 32
    state = ConsoleState(party="bank", role="label", topology="vertical")
    with _client(live_views(state), token=token) as client:
        assert client.get("/api/state").status_code == 401
        assert client.get("/?token=wrong").status_code == 401
        assert client.get("/api/state", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        first = client.get(f"/?token={token}", follow_redirects=False)
        assert first.status_code == 303 and "httponly" in first.headers["set-cookie"].lower()
        assert client.get("/api/state").status_code == 200  # the cookie, from now on


def test_a_finished_folder_shows_its_own_files_by_name_only(tmp_path):
    party = tmp_path / "r1" / "bank"
    party.mkdir(parents=True)
    (party / "result.json").write_text(json.dumps({"party": "bank", "role": "label", "best_epoch": 1, "history": [
        {"epoch": 0, "train_loss": 0.6}, {"epoch": 1, "train_loss": 0.5}], "comm": {"sent": {"Gradients": {
            "frames": 3, "bytes": 300}}, "by_peer": {"partner": {"sent": 300, "received": 10}}}}))
    (party / "peers.json").write_text(json.dumps({"peers": {"partner": "AB:CD"}}))
    (party / "roc.png").write_bytes(b"\x89PNG")
    (party / "model.npz").write_bytes(b"secret weights")
    assert list(find_runs(tmp_path)) == ["r1/bank"]
    snap = finished_snapshot(party)
    assert snap["training"]["loss"] == [[1, 0.6], [2, 0.5]] and snap["peers"][0]["fingerprint"] == "AB:CD"
    with _client(Views(runs=tmp_path)) as client:
        state = client.get("/api/state", params={"view": "r1/bank"}).json()
        assert state["outputs"]["pictures"] == ["roc.png"]
        assert client.get("/files/r1/bank/roc.png").content == b"\x89PNG"
        assert client.get("/files/r1/bank/model.npz").status_code == 404  # not a file the console shows
        assert client.get("/files/r1/bank/result.json").status_code == 404
        assert client.get("/api/state", params={"view": "r1/other"}).status_code == 404


# -- the console of `vsplit bin` and of the models trained in trees or steps (boosting, scorecard) ---------------------
def _watched_run(nodes: dict, watched: tuple[str, ...]) -> dict[str, list[dict]]:
    """Run ``nodes`` (party -> node) in threads over memory channels, each of ``watched`` with a console state; the
    snapshots read every 20 ms while they run (the last one after the run)."""
    import threading

    from _serving_support import _channels, _in_threads

    states = {p: ConsoleState(party=p, role=nodes[p].role, topology="vertical", folder=nodes[p].folder)
              for p in watched}
    for p, state in states.items():
        nodes[p].console = state
    seen: dict[str, list[dict]] = {p: [] for p in watched}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.02):
            for p, state in states.items():
                seen[p].append(state.snapshot())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    channels = _channels()
    try:
        _in_threads({p: (lambda p=p: nodes[p].run(channels[p])) for p in nodes})
    finally:
        stop.set()
        watcher.join()
    for p, state in states.items():
        state.finished()
        seen[p].append(state.snapshot())
    return seen


@pytest.fixture(scope="module")
def boosted(tmp_path_factory):
    """A boosting run of bank, shop and telco in one process (5 trees, rows held out for early stopping), the bank's
    and the shop's consoles watching."""
    pytest.importorskip("heu")
    from _boosting_support import COLUMNS, TREES, prepare, small_keys

    from vsplit.config import load_config
    from vsplit.node import PartyNode

    root = tmp_path_factory.mktemp("console-boost")
    prepare(root, "console-boost")
    overrides = ['data.test_path=""', "boosting.early_stopping_rounds=50", "train.validation_fraction=0.2"]
    with small_keys():
        nodes = {p: PartyNode(load_config(root / p / "party.toml", overrides=overrides), progress=False)
                 for p in COLUMNS}
        seen = _watched_run(nodes, ("bank", "shop"))
    return nodes, seen, TREES


def test_a_boosting_run_shows_trees_done_and_the_held_out_log_loss_per_tree(boosted):
    nodes, seen, trees = boosted
    bank = [s["training"] for s in seen["bank"]]
    live = [t["done"] for s, t in zip(seen["bank"], bank, strict=True) if s["status"] == "running" and "unit" in t]
    assert live and min(live) < trees and live == sorted(live)  # fed while the trees grew, never going back
    last = bank[-1]
    losses = json.loads((nodes["bank"].folder / "result.json").read_text())["validation_losses"]
    assert (last["unit"], last["done"], last["total"], last["loss_x"]) == ("trees", trees, trees, "trees")
    assert last["loss_name"] == "held-out log loss" and len(losses) == trees
    assert [y for _, y in last["loss"]] == pytest.approx(losses, abs=1e-6)
    assert "training" in {s["stage"] for s in seen["bank"]}
    shop = seen["shop"][-1]["training"]  # a partner counts the trees; the held-out loss is the label party's
    assert (shop["unit"], shop["done"]) == ("trees", trees) and shop["loss"] == []


def test_a_finished_boosting_run_shows_its_trees_loss_and_model_card(boosted):
    nodes, _, trees = boosted
    runs = nodes["bank"].folder.parent.parent
    assert {"console-boost/bank", "console-boost/shop", "console-boost/telco"} <= set(find_runs(runs))
    with _client(Views(runs=runs)) as client:
        state = client.get("/api/state", params={"view": "console-boost/bank"}).json()
        t = state["training"]
        assert (t["unit"], t["done"], len(t["loss"]), t["loss_name"]) == ("trees", trees, trees, "held-out log loss")
        assert state["outputs"]["model_card"] == "model_card.html"
        page = client.get("/files/console-boost/bank/model_card.html")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        shop = client.get("/api/state", params={"view": "console-boost/shop"}).json()
        assert shop["training"]["done"] == trees and "loss_name" not in shop["training"]
        assert shop["outputs"]["model_card"] is None  # the trees and the card are the label party's


@pytest.fixture(scope="module")
def binned(tmp_path_factory):
    """`vsplit bin` of bank, shop and telco in one process, the bank's console watching."""
    pytest.importorskip("heu")
    from _boosting_support import small_keys
    from _pilot_support import free_port
    from _three_party_support import COLUMNS, prepare_three_parties

    from vsplit.config import load_config
    from vsplit.node.woe import WoeNode

    root = tmp_path_factory.mktemp("console-bin")
    configs = prepare_three_parties(root, port=free_port(), run_id="console-bin")
    for path in configs.values():
        path.write_text(path.read_text() + "\n[woe]\nkey_bits = 1024\nfine_bins = 6\n")
    with small_keys():
        nodes = {p: WoeNode(load_config(configs[p]), progress=False) for p in COLUMNS}
        seen = _watched_run(nodes, ("bank",))
    return nodes, seen


def test_a_bin_run_shows_its_stages_live_and_its_value_report_when_finished(binned):
    nodes, seen = binned
    assert {"psi", "binning"} <= {s["stage"] for s in seen["bank"]}
    runs = nodes["bank"].folder.parent.parent
    assert set(find_runs(runs)) == {"console-bin/bank", "console-bin/shop", "console-bin/telco"}  # woe.json only
    with _client(Views(runs=runs)) as client:
        state = client.get("/api/state", params={"view": "console-bin/bank"}).json()
        assert state["psi"]["intersection"] > 0 and any(r["bytes"] for r in state["traffic"])
        out = state["outputs"]
        assert out["value_report"] == "value_report.html" and "iv.png" in out["pictures"]
        assert {"value_report.html", "value_report.md"} <= set(out["documents"])
        md = client.get("/files/console-bin/bank/value_report.md")
        assert md.status_code == 200 and md.headers["content-type"].startswith("text/plain")
        assert client.get("/files/console-bin/bank/iv.png").content[:4] == b"\x89PNG"
        assert client.get("/files/console-bin/bank/woe.npz").status_code == 404
        shop = client.get("/api/state", params={"view": "console-bin/shop"}).json()
        assert shop["outputs"]["value_report"] is None  # the value report is the bank's


SCORECARD = """
[model]
kind = "scorecard"

[woe]
fine_bins = 6
key_bits = 1024
select_min_iv = 0.001

[scorecard]
iterations = 5
key_bits = 1024
"""


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A scorecard run of bank, shop and telco in one process (5 steps), the bank's and the shop's consoles
    watching."""
    pytest.importorskip("heu")
    from _boosting_support import small_keys
    from _pilot_support import free_port
    from _three_party_support import COLUMNS, prepare_three_parties

    from vsplit.config import load_config
    from vsplit.node import PartyNode

    root = tmp_path_factory.mktemp("console-scorecard")
    configs = prepare_three_parties(root, port=free_port(), run_id="console-card", extra=SCORECARD)
    with small_keys():
        nodes = {p: PartyNode(load_config(configs[p], overrides=['data.test_path=""']), progress=False)
                 for p in COLUMNS}
        seen = _watched_run(nodes, ("bank", "shop"))
    return nodes, seen


def test_a_scorecard_run_shows_its_steps_live_and_its_card_when_finished(scored):
    nodes, seen = scored
    for party in ("bank", "shop"):
        live = [s["training"]["done"] for s in seen[party] if s["status"] == "running" and "unit" in s["training"]]
        last = seen[party][-1]["training"]
        assert live == sorted(live) and (last["unit"], last["done"], last["total"]) == ("steps", 5, 5)
        assert last["loss"] == []  # the scorecard machines keep no loss: steps only
    assert {"binning", "training"} <= {s["stage"] for s in seen["bank"]}
    runs = nodes["bank"].folder.parent.parent
    with _client(Views(runs=runs)) as client:
        state = client.get("/api/state", params={"view": "console-card/bank"}).json()
        assert (state["training"]["unit"], state["training"]["done"]) == ("steps", 5)
        assert state["outputs"]["model_card"] == "scorecard.md"
        card = client.get("/files/console-card/bank/scorecard.md")
        assert card.status_code == 200 and card.headers["content-type"].startswith("text/plain")


# -- the console of `vsplit tune`: the search's stage, peers and traffic, trials done and the best AUC so far ----------
def test_a_search_shows_trials_done_of_its_total_and_the_best_validation_auc_so_far_not_each_trials_epochs():
    from vsplit.tune.progress import SearchProgress, TrialConsole

    state = ConsoleState(party="bank", role="label", topology="vertical", mode="tune")
    shown = SearchProgress(total=4, done=1)  # a resumed study: one trial ran before
    state.watch_progress(shown.read)
    before = state.snapshot()["training"]
    assert (before["unit"], before["done"], before["total"], before["loss"]) == ("trials", 1, 4, [])
    pump = type("Pump", (), {"stats": CommStats(), "lost": [], "closed": [], "machine": None})()
    pump.stats.record("sent", "partner", "TrialValues", 40)
    trial = TrialConsole(state)  # what a trial's node is handed: its pump is shown, its epochs are not
    trial.watch_run(channels={"partner": Channel()}, pump=pump)
    trial.on_step(0, 0, 2, 0.7)
    trial.on_epoch({"epoch": 0, "val_auc": 0.9})
    trial.watch_progress(lambda: {"unit": "steps", "done": 9})
    for best in (0.70, None, 0.74):  # None: a trial ended with no finished trial in the study (the loop's _best)
        shown.trial_ended(best_auc=best)
    snap = json.loads(json.dumps(state.snapshot()))
    training = snap["training"]
    assert (training["unit"], training["done"], training["total"]) == ("trials", 4, 4)
    assert training["loss"] == [[2, 0.7], [4, 0.74]] and training["loss_name"] == "best validation AUC so far"
    assert training["history"] == [] and training["step"] == 0  # a trial's epochs and steps stay off the page
    assert snap["traffic"][0]["type"] == "TrialValues" and snap["peers"][0]["state"] == "connected"
    assert snap["mode"] == "tune" and snap["status"] == "running"
    partner = SearchProgress(total=None)  # a partner is not told the study's size
    partner.trial_ended()
    assert partner.read() == {"unit": "trials", "done": 1, "total": None}


def test_vsplit_tune_takes_console_and_hands_the_search_the_console_state(monkeypatch, tmp_path):
    from contextlib import contextmanager
    from types import SimpleNamespace

    import vsplit.config
    import vsplit.console.live
    import vsplit.tune.between
    import vsplit.tune.trial
    from vsplit.cli.main import build_parser

    args = build_parser().parse_args(["tune", "--config", "party.toml", "--console", "--quiet"])
    assert args.console is True
    assert build_parser().parse_args(["tune", "--config", "party.toml"]).console is False
    seen: dict = {}
    state = ConsoleState(party="bank", role="label", topology="vertical", mode="tune")

    @contextmanager
    def live_console(config, *, enabled, mode, node=None, folder=None):
        seen.update(enabled=enabled, mode=mode, folder=folder)
        yield state

    def tune(config, *, progress, overrides, console):
        seen["console"] = console
        return vsplit.tune.between.TuneOutcome(party="bank", best={"number": 0, "auc": 0.7, "values": {}})

    config = SimpleNamespace(output=SimpleNamespace(log_max_mb=1.0))
    monkeypatch.setattr(vsplit.config, "load_config", lambda path, overrides: config)
    monkeypatch.setattr(vsplit.tune.trial, "tune_folder", lambda config: tmp_path / "tune")
    monkeypatch.setattr(vsplit.console.live, "live_console", live_console)
    monkeypatch.setattr(vsplit.tune.between, "tune", tune)
    assert args._run(args) == 0
    assert seen == {"enabled": True, "mode": "tune", "folder": tmp_path / "tune", "console": state}
