"""`vsplit tune` against a curious or malicious peer (issue 45, finding 3's search half, finding 9, and two Low items).

A label party that proposes a trial which never trains (``lr = 1e-12``) leaves a partner's bottom at its initial
weights, which it may then invert; a partner refuses it by vsplit's hard limits even where its config bounds nothing,
and refuses an absurd width before it builds anything. A forged end of the search (values outside the partner's
bounds, a trial it never trained, other values than it trained) is refused and no ``best.toml`` is written. A
partner's refusal text with newlines and terminal escapes reaches the label party's log, journal and ``tune.json``
only as printable, short text.

The round machines are driven directly; where the search itself is run (:func:`vsplit.tune.between.tune`), one party
is real and the other is played by the real round machines (or a hostile one) over in-memory channels, so nothing
trains.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from test_config import PARTNER, write

from vsplit.config import load_config
from vsplit.errors import ConfigError, ProtocolError, VsplitError
from vsplit.node.node import session_id
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.text import printable
from vsplit.runtime.pump import Pump
from vsplit.transport import codec
from vsplit.transport.memory import memory_pair
from vsplit.tune import between
from vsplit.tune.messages import Answer, TuneAnswer, TuneProposal
from vsplit.tune.rounds import AnswerRound, EndRound, ProposeRound
from vsplit.tune.settings import bounds_of

SESSION = b"tune-hostile-001"
#: the leaky trial of finding 3: it trains nothing, so the partner's bottom keeps its initial weights
LEAKY = {"lr": 1e-12, "numeric_embedding": "none", "embedding_width": 32}
#: a partner that bounds its bottom's width and nothing else (no bound on lr, epochs, embedding_width)
SHOP_TUNE = "\n[output]\nrun_id = \"hostile\"\n\n[tune]\nbounds = { bottom_width = [16, 64] }\n"
BANK = """
[party]
name = "bank"
role = "label"
[data]
path = "bank.csv"
label = "y"
[network]
listen = "127.0.0.1:7700"
key = "keys/bank.key"
cert = "keys/bank.pem"
peers = { partner = "keys/partner.pem" }
[output]
run_id = "hostile"
[tune]
n_trials = 1
"""
#: a refusal's bound as a hostile partner writes it: a forged log line, terminal escapes, and length
EVIL = "[1e-05, 1]\n2026-12-06 bank INFO trial 0 finished: AUC 0.99\x1b[2J\x1b[31m\r\u202e" + "A" * 150


def _wire(message):
    """``message`` through the codec, as a peer receives it."""
    return codec.decode(codec.encode(message, session=SESSION, seq=0))[1]


def _answer(partner: AnswerRound, values: dict) -> TuneAnswer:
    [proposal] = ProposeRound([partner.me], number=0, values=values).start()
    [reply] = partner.receive("bank", _wire(proposal.message))
    return _wire(reply.message)


@pytest.fixture(scope="module")
def shop_bounds(tmp_path_factory):
    """The bounds of a partner whose config bounds only bottom_width, as vsplit reads them from its config."""
    folder = tmp_path_factory.mktemp("shop")
    return bounds_of(load_config(write(folder, PARTNER + SHOP_TUNE), check_files=False))


def test_leaky_trial_refused_by_a_partner_whose_config_sets_no_bound_for_lr(shop_bounds):
    assert "lr" not in shop_bounds and "embedding_width" not in shop_bounds
    label = ProposeRound(["partner"], number=0, values=LEAKY)
    partner = AnswerRound("partner", bounds=shop_bounds)
    [reply] = partner.receive("bank", _wire(label.start()[0].message))
    answer = _wire(reply.message)
    assert answer == TuneAnswer(number=0, code=Answer.OUT_OF_BOUNDS, knob="lr", bound="[1e-05, 1]")
    [decision] = label.receive("partner", answer)
    partner.receive("bank", _wire(decision.message))
    assert not label.result.go and not partner.result.go  # the trial never trains
    assert label.result.refusals == {"partner": "partner refuses the trial: lr = 1e-12 is outside its bound [1e-05, 1]"}


@pytest.mark.parametrize("knob, value, bound", [
    ("epochs", 0, "[1, 200]"),  # trains nothing either
    ("dropout", 1.0, "[0, 0.9]"),  # the bottom's output no longer depends on what it learned
    ("embedding_width", 2_000_000, "[1, 1024]"),  # 194 M parameters at the partner
    ("numeric_width", 100_000, "[1, 64]"),
    ("numeric_bins", 1_000_000, "[2, 256]"),
    ("weight_decay", 50.0, "[0, 0.1]"),
])
def test_a_knob_its_config_leaves_open_is_refused_beyond_vsplits_hard_limit(shop_bounds, knob, value, bound):
    answer = _answer(AnswerRound("partner", bounds=shop_bounds), {"lr": 1e-3, knob: value})
    assert (answer.code, answer.knob, answer.bound) == (Answer.OUT_OF_BOUNDS, knob, bound)


def test_a_whole_number_knob_with_a_fraction_is_refused(shop_bounds):
    answer = _answer(AnswerRound("partner", bounds=shop_bounds), {"epochs": 2.5})
    assert (answer.code, answer.knob) == (Answer.OUT_OF_BOUNDS, "epochs")


def test_a_config_whose_space_or_bounds_go_beyond_the_hard_limits_is_refused_naming_the_key(tmp_path):
    bank = write(tmp_path, BANK + "space = { embedding_width = [8, 2000000], lr = [0.001, 0.01] }\n")
    with pytest.raises(ConfigError, match=r"tune\.space\.embedding_width: \[8, 2000000\] goes beyond vsplit's hard "
                                          r"limit \[1, 1024\]"):
        load_config(bank, check_files=False)
    shop = write(tmp_path, PARTNER + SHOP_TUNE.replace("bottom_width = [16, 64]", "lr = [1e-9, 0.1]"))
    with pytest.raises(ConfigError, match=r"tune\.bounds\.lr: \[1e-09, 0\.1\] goes beyond vsplit's hard limit"):
        load_config(shop, check_files=False)


class FakeLabel:
    """The label party's side of a search, played round by round by the given machines over in-memory channels."""

    def __init__(self, machines: list) -> None:
        self.pairs = [memory_pair() for _ in machines]
        self.machines, self.errors, self.round = machines, [], 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def connect(self) -> dict:
        """The partner's ``connect``: its end of the next round's channel."""
        self.round += 1
        return {"bank": self.pairs[self.round - 1][1]}

    def _run(self) -> None:
        for (ours, _), machine in zip(self.pairs, self.machines, strict=True):
            try:
                Pump("bank", {"partner": ours}, session=session_id("hostile:tune"), timeout=20).run(machine)
            except Exception as exc:  # the partner's abort, when it refuses
                self.errors.append(exc)
            finally:
                ours.close()


def _shop(tmp_path: Path):
    return load_config(write(tmp_path, PARTNER + SHOP_TUNE), check_files=False)


def test_absurd_embedding_width_refused_before_anything_is_built(tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr(between, "TrialNode", lambda *args, **kwargs: built.append(args))
    label = FakeLabel([ProposeRound(["partner"], number=0, values={"embedding_width": 2_000_000}),
                       EndRound(["partner"], best=-1, values={}, auc=0.0, scores={})])
    with pytest.raises(VsplitError, match="no trial of the search finished"):
        between.tune(_shop(tmp_path), progress=False, connect=label.connect)
    label.thread.join(timeout=20)
    assert built == [] and not label.errors
    summary = json.loads((tmp_path / "runs" / "hostile" / "partner" / "tune" / "tune.json").read_text())
    assert summary["trials"][0]["error"] == ("partner refuses the trial: embedding_width = 2000000 is outside its "
                                             "bound [1, 1024]")


@pytest.mark.parametrize("best, values, why", [
    (1, {"bottom_width": 512}, "names values partner refuses"),  # outside its bound [16, 64]
    (1, {"lr": 1e-12}, "names values partner refuses"),  # outside the hard limit
    (7, {"bottom_width": 32}, "names trial 7 as the best, a trial partner did not train"),
    (1, {"bottom_width": 48}, "with values other than those partner trained it with"),
    (1, {"bottom_width": 32, "lr": 0.5}, "with values other than those partner trained it with"),
])
def test_forged_end_of_search_refused_by_the_round(shop_bounds, best, values, why):
    partner = AnswerRound("partner", bounds=shop_bounds, trained={1: {"bottom_width": 32}})
    end = EndRound(["partner"], best=best, values=values, auc=0.9, scores={best: 0.9}).start()[0].message
    with pytest.raises(ProtocolError, match=why):
        partner.receive("bank", _wire(end))
    assert not partner.done


def test_end_of_search_giving_the_best_trial_another_auc_is_refused(shop_bounds):
    partner = AnswerRound("partner", bounds=shop_bounds, trained={1: {"bottom_width": 32}})
    end = EndRound(["partner"], best=1, values={"bottom_width": 32}, auc=0.99, scores={1: 0.71}).start()[0].message
    with pytest.raises(ProtocolError, match="two different AUCs"):
        partner.receive("bank", _wire(end))
    honest = AnswerRound("partner", bounds=shop_bounds, trained={1: {"bottom_width": 32}})
    honest.receive("bank", _wire(EndRound(["partner"], best=1, values={"bottom_width": 32}, auc=0.71,
                                          scores={1: 0.71}).start()[0].message))
    assert honest.done and honest.result.best == 1


@pytest.mark.parametrize("values", [{"bottom_width": 512}, {"bottom_width": 32}])
def test_forged_end_of_search_makes_the_partner_write_no_best_config(tmp_path, values):
    """The end comes first: the partner trained nothing, so no trial can be its best (512 is outside its bound)."""
    label = FakeLabel([EndRound(["partner"], best=0, values=values, auc=0.97, scores={0: 0.97})])
    with pytest.raises(ProtocolError, match="nothing written"):
        between.tune(_shop(tmp_path), progress=False, connect=label.connect)
    label.thread.join(timeout=20)
    folder = tmp_path / "runs" / "hostile" / "partner" / "tune"
    assert not (folder / "best.toml").exists() and not (folder / "tune.json").exists()


class HostilePartner:
    """A partner that refuses every trial with a bound of its own words, and takes the end of the search."""

    def __init__(self) -> None:
        self.done, self.result = False, None

    def start(self) -> list:
        return []

    def receive(self, sender: str, msg) -> list:
        if isinstance(msg, TuneProposal):
            return [Outgoing(sender, TuneAnswer(number=msg.number, code=Answer.OUT_OF_BOUNDS, knob="lr", bound=EVIL))]
        self.done = True  # the decision, or the end
        return []


def test_refusal_text_with_newlines_and_escapes_reaches_the_log_and_files_only_as_printable_capped_text(
        tmp_path, caplog):
    pytest.importorskip("optuna")
    assert len(EVIL) <= 256  # what a TuneAnswer may carry
    pairs = [memory_pair(), memory_pair()]
    rounds = iter(pairs)

    def hostile() -> None:
        for ours, theirs in pairs:
            del ours
            Pump("partner", {"bank": theirs}, session=session_id("hostile:tune"), timeout=30).run(HostilePartner())

    thread = threading.Thread(target=hostile, daemon=True)
    thread.start()
    config = load_config(write(tmp_path, BANK), check_files=False)
    with caplog.at_level(logging.WARNING, logger="vsplit.tune.between"), \
            pytest.raises(VsplitError, match="no trial of the search finished"):
        between.tune(config, progress=False, connect=lambda: {"partner": next(rounds)[0]})
    thread.join(timeout=30)
    folder = tmp_path / "runs" / "hostile" / "bank" / "tune"
    [trial] = json.loads((folder / "tune.json").read_text())["trials"]
    logged = [r.getMessage() for r in caplog.records if "trial 0 failed" in r.getMessage()]
    assert logged and trial["error"].startswith("partner refuses the trial: lr = ")
    for text in (trial["error"], *logged):
        assert text.isprintable() and "\x1b" not in text and "AUC 0.99" in text, text  # one line, no escapes
        assert len(text) < 200, text  # the bound cut to 80 characters
    journal = (folder / "study.log").read_text()
    assert "\\u001b" not in journal and "\\n2026" not in journal and "\\u202e" not in journal


def test_printable_keeps_text_drops_escapes_and_caps_length():
    assert printable("a\nb\tc\x1b[1;31md\x1b]0;title\x07e\u202ef") == "a b cde f"
    assert printable("é ok ✓") == "é ok ✓"
    assert printable("x" * 500) == "x" * 197 + "..."
    assert len(printable("\x1b[31m" * 100 + "y" * 300, limit=50)) == 50
