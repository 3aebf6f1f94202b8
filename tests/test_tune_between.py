"""`vsplit tune` between organizations: a bank and two partners, each its own OS process over mutual TLS, run a
small study; a partner refuses a trial outside its own bound (recorded, named, not fatal); poisoning the test labels
changes nothing of the search (it never reads the test rows); a partner's frames carry its answers and what training
sends, nothing else; the study resumes.

The in-process runs join the same code by in-memory channels (:class:`Switchboard`: fresh channels for every round,
as the processes open fresh mutual-TLS links), so the frames a partner sends can be recorded and decoded.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from _pilot_support import free_port, start, wait_all
from _three_party_support import COLUMNS, PARTNERS, prepare_three_parties

from vsplit.config import load_config
from vsplit.errors import DataError
from vsplit.models.rng import PartyRng
from vsplit.transport import codec
from vsplit.transport.memory import memory_pair
from vsplit.tune import between
from vsplit.tune.between import tune
from vsplit.tune.messages import TuneAnswer

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest.importorskip("optuna")

TRAIN = "[train]\nepochs = 2\nbatch_size = 256\npatience = 100\n\n[model]\nnumeric_embedding = \"piecewise\"\n"
BANK_TUNE = """
[tune]
n_trials = 3
seed = 0
space = { lr = [0.001, 0.01], numeric_bins = [4, 16], bottom_width = [16, 32] }
"""
#: shop accepts at most 10 bins per column: the bank's space reaches 16, so some trials are refused
PARTNER_TUNE = {"shop": "\n[tune]\nbounds = { numeric_bins = [4, 10], bottom_width = [8, 64] }\n",
                "telco": "\n[tune]\nbounds = { bottom_width = [16, 32], dropout = [0.0, 0.5] }\n"}
#: what a partner sends in a search besides its answers: what `vsplit train` sends (PSI, training, abort codes)
TRAINING_MESSAGES = {"Hello", "Blinded", "Doubled", "Selected", "Ready", "Activations", "EpochEnd", "Abort",
                     "PackedActivations"}


def _study_configs(root: Path) -> dict[str, Path]:
    configs = prepare_three_parties(root, port=free_port(), run_id="tune", extra=TRAIN)
    with open(configs["bank"], "a") as handle:
        handle.write(BANK_TUNE)
    for partner in PARTNERS:
        with open(configs[partner], "a") as handle:
            handle.write(PARTNER_TUNE[partner])
    return configs


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A study run by three OS processes over mutual TLS (`vsplit tune`): the configs, the run folder, the logs."""
    root = tmp_path_factory.mktemp("tune")
    configs = _study_configs(root)
    logs = {p: root / f"{p}-tune.log" for p in configs}
    procs = {p: start(["tune", "--config", str(c), "--quiet"], log=logs[p]) for p, c in configs.items()}
    wait_all(procs, logs, timeout=240)
    return configs, root / "runs" / "tune", logs


def _summary(run: Path, party: str) -> dict:
    return json.loads((run / party / "tune" / "tune.json").read_text())


def test_three_processes_run_a_study_and_each_party_writes_its_ready_to_run_best_config(study):
    configs, run, logs = study
    bank = _summary(run, "bank")
    trials = bank["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2]
    finished = [t for t in trials if t["state"] == "COMPLETE"]
    assert finished and all(0.5 < t["auc"] <= 1.0 for t in finished), trials
    assert bank["best"]["auc"] == max(t["auc"] for t in finished)
    assert "best: trial" in logs["bank"].read_text()
    for party in COLUMNS:
        best = tomllib.loads((run / party / "tune" / "best.toml").read_text())
        values = bank["best"]["values"]
        assert best["model"]["numeric_bins"] == values["numeric_bins"]
        assert best["model"]["bottom_hidden"] == [values["bottom_width"]]
        assert best["train"]["lr"] == pytest.approx(values["lr"])
        config = load_config(run / party / "tune" / "best.toml")  # ready to run: every path resolves from there
        assert config.data.path == str(configs[party].parent / "data" / "train.parquet")
        if party != "bank":  # each partner took part in every trial and was told the AUCs the bank measured
            own = _summary(run, party)
            assert [t["number"] for t in own["trials"]] == [0, 1, 2]
            assert own["best"] == bank["best"]
            assert {t["number"]: t["auc"] for t in own["trials"]} == {t["number"]: t["auc"] for t in trials}


def test_a_trial_outside_a_partners_bound_is_refused_naming_the_bound_and_the_search_goes_on(study):
    _, run, _ = study
    trials = _summary(run, "bank")["trials"]
    refused = [t for t in trials if t["values"]["numeric_bins"] > 10]
    assert refused and len(refused) < len(trials), trials  # the seeded search proposes some of each
    for trial in trials:
        if trial in refused:
            assert trial["state"] == "FAIL" and trial["auc"] is None
            assert trial["error"] == (f"shop refuses the trial: numeric_bins = {trial['values']['numeric_bins']} is "
                                      "outside its bound [4, 10]")
        else:
            assert trial["state"] == "COMPLETE", trial
    shop = {t["number"]: t for t in _summary(run, "shop")["trials"]}
    telco = {t["number"]: t for t in _summary(run, "telco")["trials"]}
    for trial in refused:  # the refusing partner logs its own refusal; the other learns only that one refused
        assert shop[trial["number"]]["error"] == trial["error"]
        assert telco[trial["number"]]["error"] == "refused by another party"


class Switchboard:
    """In-memory channels for every round of an in-process search: a party's n-th ``connect()`` gets its ends of
    the n-th round's channels; frames the partners send are recorded (``sent[partner]``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pairs: dict[tuple[int, str], tuple] = {}
        self.rounds: dict[str, int] = defaultdict(int)
        self.sent: dict[str, list[bytes]] = defaultdict(list)

    def connect(self, party: str):
        def open_round() -> dict:
            with self.lock:
                number = self.rounds[party]
                self.rounds[party] += 1
                if party == "bank":
                    return {p: self._pair(number, p)[0] for p in PARTNERS}
                return {"bank": Recording(self._pair(number, party)[1], self.sent[party])}
        return open_round

    def _pair(self, number: int, partner: str) -> tuple:
        return self.pairs.setdefault((number, partner), memory_pair())


class Recording:
    """A channel end that keeps a copy of every frame it sends."""

    def __init__(self, channel, frames: list[bytes]) -> None:
        self.channel, self.frames = channel, frames

    def send(self, frame) -> None:
        self.frames.append(bytes(frame))
        self.channel.send(frame)

    def __getattr__(self, name):
        return getattr(self.channel, name)


@pytest.fixture
def private_streams(monkeypatch):
    """Each party's private torch stream (:class:`~vsplit.models.rng.PartyRng`) swapped in and out under one lock:
    parties in threads then draw what they draw in processes of their own (no swap interleaves with another's)."""
    lock = threading.RLock()
    init, enter, leave = PartyRng.__init__, PartyRng.__enter__, PartyRng.__exit__

    def locked_init(self, seed):
        with lock:
            init(self, seed)

    def locked_enter(self):
        lock.acquire()
        return enter(self)

    def locked_exit(self, *exc):
        try:
            return leave(self, *exc)
        finally:
            lock.release()

    monkeypatch.setattr(PartyRng, "__init__", locked_init)
    monkeypatch.setattr(PartyRng, "__enter__", locked_enter)
    monkeypatch.setattr(PartyRng, "__exit__", locked_exit)


def _run_in_process(configs: dict[str, Path], overrides: list[str],
                    more: dict[str, list[str]] | None = None) -> tuple[dict, Switchboard]:
    """The three parties' search in threads of this process, with ``overrides`` (and ``more[party]``) set."""
    board, outcomes, errors = Switchboard(), {}, {}

    def party(name: str) -> None:
        try:
            sets = [*overrides, *(more or {}).get(name, [])]
            config = load_config(configs[name], overrides=sets)
            outcomes[name] = tune(config, progress=False, overrides=sets, connect=board.connect(name))
        except BaseException as exc:  # reported below
            errors[name] = exc

    threads = [threading.Thread(target=party, args=(name,)) for name in COLUMNS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not errors, errors
    return outcomes, board


def test_poisoned_test_labels_change_nothing_and_partner_frames_carry_only_answers_and_training(study,
                                                                                                 private_streams):
    configs, run, _ = study
    for party in COLUMNS:  # poison the test rows: every bank label flipped, every partner column scrambled
        path = configs[party].parent / "data" / "test.parquet"
        table = pd.read_parquet(path)
        if party == "bank":
            table["y"] = table["y"].map({"yes": "no", "no": "yes"})
        else:
            table = table.assign(**{c: table[c].sample(frac=1.0, random_state=1).to_numpy() for c in table.columns
                                    if c != "customer_id"})
        table.to_parquet(path, index=False)
    poisoned = ["output.dir=../runs-poisoned"]
    outcomes, board = _run_in_process(configs, poisoned)
    clean = _summary(run, "bank")
    again = _summary(configs["bank"].parent.parent / "runs-poisoned" / "tune", "bank")
    keep = ("number", "state", "values", "auc", "error")
    assert [{k: t[k] for k in keep} for t in again["trials"]] == [{k: t[k] for k in keep} for t in clean["trials"]]
    assert again["best"] == clean["best"] == outcomes["bank"].best

    for partner in PARTNERS:
        kinds = defaultdict(list)
        for frame in board.sent[partner]:
            message = codec.decode(frame)[1]
            kinds[type(message).__name__].append(message)
        assert set(kinds) - {"TuneAnswer"} <= TRAINING_MESSAGES, sorted(kinds)
        assert len(kinds["TuneAnswer"]) == 3  # one answer per trial: accepted, or the knob and its own bound
        for answer in kinds["TuneAnswer"]:
            assert isinstance(answer, TuneAnswer)
            assert (answer.knob, answer.bound) in {("", ""), ("numeric_bins", "[4, 10]")}, answer


def test_a_study_resumes_from_its_journal_and_a_crashed_trial_is_recorded_not_fatal(study, private_streams,
                                                                                     tmp_path, monkeypatch):
    configs, run, _ = study
    journal = tmp_path / "study.log"  # a copy of the processes' study (3 trials), resumed up to 5
    shutil.copy(run / "bank" / "tune" / "study.log", journal)
    more = ["output.dir=../runs-resumed", f"tune.study={journal}", "tune.n_trials=5"]
    for partner in PARTNERS:  # each partner's record of the trials it trained, as when resumed in its own folder
        resumed = configs[partner].parent.parent / "runs-resumed" / "tune" / partner / "tune"
        resumed.mkdir(parents=True, exist_ok=True)
        shutil.copy(run / partner / "tune" / "tune.json", resumed / "tune.json")
    narrow = {"bank": ["tune.space={ lr = [0.001, 0.01], numeric_bins = [4, 8], bottom_width = [16, 32] }"]}
    real = between.trial_config

    def telco_crashes(config, values, *, number):  # telco's trials 3 and 4 fail before training
        if config.party.name == "telco" and number >= 3:
            raise DataError("telco: a column failed validation (injected by the test)")
        return real(config, values, number=number)

    monkeypatch.setattr(between, "trial_config", telco_crashes)
    outcomes, _ = _run_in_process(configs, more, narrow)
    keep = ("number", "state", "values", "auc", "error")
    trials = outcomes["bank"].trials
    assert [t["number"] for t in trials] == [0, 1, 2, 3, 4]
    assert [{k: t[k] for k in keep} for t in trials[:3]] == [{k: t[k] for k in keep} for t in
                                                             _summary(run, "bank")["trials"]]
    for trial in trials[3:]:  # the bank learns telco's abort code, never its reason
        assert trial["state"] == "FAIL" and trial["error"].startswith("crashed: "), trial
        assert "telco" in trial["error"] and "injected" not in trial["error"], trial
    assert outcomes["bank"].best == _summary(run, "bank")["best"]
    assert [t["number"] for t in outcomes["shop"].trials] == [3, 4]  # the partners take part in new trials only
    assert all(t["state"] == "FAIL" for t in outcomes["shop"].trials)
    assert all("injected" in t["error"] for t in outcomes["telco"].trials)  # telco logs its own reason


def test_a_trials_validation_auc_is_the_same_split_trained_in_a_notebook_on_the_inner_training_rows(study):
    """The bank's validation rows and the inner-train rows are the training rows cut in two; the trial the processes
    trained is, bit for bit, SplitClassifier fit on the inner-train rows and scored on the validation rows."""
    import torch

    from vsplit.estimator import SplitClassifier
    from vsplit.evaluation import shared_test_views
    from vsplit.tune.space import estimator_params

    configs, run, _ = study
    rows = run / "bank" / "tune" / "rows"
    fit, valid = pd.read_parquet(rows / "fit.parquet"), pd.read_parquet(rows / "valid.parquet")
    train = pd.read_parquet(configs["bank"].parent / "data" / "train.parquet")
    assert len(fit) + len(valid) == len(train) and set(fit["customer_id"]).isdisjoint(valid["customer_id"])
    partners = {p: pd.read_parquet(configs[p].parent / "data" / "train.parquet") for p in PARTNERS}
    best = _summary(run, "bank")["best"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the party processes (train.threads)
    try:
        clf = SplitClassifier(label_party="bank", label="y", positive_label="yes", random_state=0, epochs=2,
                              candidates="network", batch_size=256, patience=100, numeric_embedding="piecewise",
                              **estimator_params(best["values"])).fit({"bank": fit, **partners})
    finally:
        torch.set_num_threads(threads)
    views = shared_test_views({"bank": valid, **partners}, label_party="bank", id_column="customer_id")
    assert clf.evaluate(views)["auc"] == best["auc"]
