"""The pieces of `vsplit tune` between organizations, one at a time: the round machines joined directly, the
messages through the codec (a proposal naming anything but a knob is refused when decoded), the `[tune]` table's
checks naming their keys, and best.toml, which loads as a config with the trial's values set."""

from __future__ import annotations

import sys

import pytest
from test_config import PARTNER, write

from vsplit.config import load_config
from vsplit.errors import ConfigError, ProtocolError
from vsplit.transport import codec
from vsplit.tune.best import write_best
from vsplit.tune.messages import Answer, TuneAnswer, TuneEnd, TuneProposal
from vsplit.tune.rounds import AnswerRound, EndRound, Proposed, ProposeRound

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SESSION = b"tune-rounds-0001"


def _wire(message):
    """``message`` through the codec, as a peer receives it."""
    return codec.decode(codec.encode(message, session=SESSION, seq=0))[1]


def test_a_round_trains_only_when_every_partner_accepts():
    label = ProposeRound(["shop", "telco"], number=4, values={"bottom_width": 40, "numeric_embedding": "periodic"})
    shop = AnswerRound("shop", bounds={"bottom_width": (16, 64), "numeric_embedding": ("piecewise", "periodic")})
    telco = AnswerRound("telco", bounds={"numeric_embedding": ("piecewise",)})
    answers = {}
    for out in label.start():
        partner = shop if out.to == "shop" else telco
        [reply] = partner.receive("bank", _wire(out.message))
        answers[out.to] = _wire(reply.message)
    assert answers["shop"] == TuneAnswer(number=4, code=Answer.ACCEPTED)
    assert answers["telco"] == TuneAnswer(number=4, code=Answer.OUT_OF_BOUNDS, knob="numeric_embedding",
                                          bound="{piecewise}")
    assert label.receive("shop", answers["shop"]) == [] and not label.done
    decisions = label.receive("telco", answers["telco"])
    assert label.done and label.result == Proposed(4, label.values, False, {
        "telco": "telco refuses the trial: numeric_embedding = periodic is outside its bound {piecewise}"})
    for out in decisions:
        partner = shop if out.to == "shop" else telco
        partner.receive("bank", _wire(out.message))
        assert partner.done and partner.result.go is False
    assert shop.result.refusals == {} and "outside its bound {piecewise}" in telco.result.refusals["telco"]


def test_the_end_round_tells_the_best_trial_and_the_aucs():
    end = EndRound(["shop"], best=2, values={"lr": 0.002}, auc=0.91, scores={0: 0.88, 2: 0.91}).start()[0].message
    partner = AnswerRound("shop", bounds={}, trained={0: {"lr": 0.001}, 2: {"lr": 0.002}})  # it trained trial 2
    partner.receive("bank", _wire(end))
    assert isinstance(partner.result, TuneEnd) and partner.result.all_scores() == {0: 0.88, 2: 0.91}


@pytest.mark.parametrize("values", ['{"rows": [1, 2]}', '{"lr": NaN}', '{"numeric_embedding": "mlp"}', "[1]",
                                    '{"lr": "0.1"}', '{"dropout": true}'])
def test_a_proposal_carrying_anything_but_knob_values_is_refused_when_decoded(values):
    proposal = TuneProposal(number=0, values='{"lr": 0.001}')
    object.__setattr__(proposal, "values", values)  # as a hostile label party's frame would carry it
    with pytest.raises(ProtocolError, match="trial values"):
        _wire(proposal)


def test_an_answer_out_of_turn_is_a_protocol_error():
    label = ProposeRound(["shop"], number=1, values={"lr": 0.001})
    label.start()
    with pytest.raises(ProtocolError, match="unexpected TuneAnswer from 'telco'"):
        label.receive("telco", TuneAnswer(number=1, code=Answer.ACCEPTED))
    with pytest.raises(ProtocolError, match="unexpected TuneAnswer from 'shop'"):
        label.receive("shop", TuneAnswer(number=0, code=Answer.ACCEPTED))


@pytest.mark.parametrize(("table", "expected"), [
    ("bounds = { width = [1, 2] }", r"tune\.bounds\.width: vsplit does not search this knob; choose from: lr, "),
    ("bounds = { numeric_bins = [32, 8] }", r"tune\.bounds\.numeric_bins: give \[low, high\], two numbers with low"),
    ("bounds = { numeric_bins = [4.5, 8] }", r"tune\.bounds\.numeric_bins: this knob takes whole numbers"),
    ('bounds = { numeric_embedding = ["mlp"] }', r"tune\.bounds\.numeric_embedding: give a list of the choices"),
    ("space = { lr = [0.001, 0.01] }", r"tune\.space: only the label party proposes trials"),
    ("n_trials = 0", r"tune\.n_trials: must be at least 1"),
])
def test_a_bad_tune_table_is_named_by_its_key(tmp_path, table, expected):
    with pytest.raises(ConfigError, match=expected):
        load_config(write(tmp_path, PARTNER + "[tune]\n" + table + "\n"))


def test_best_toml_is_the_partys_config_with_the_trials_values_and_absolute_paths(tmp_path):
    config = load_config(write(tmp_path, PARTNER + "[model]\nbottom_hidden = [64, 32]\n[tune]\n"
                                                   "bounds = { dropout = [0.0, 0.4] }\n"))
    path = write_best(tmp_path / "out" / "best.toml", config,
                      {"bottom_width": 48, "dropout": 0.25, "weight_decay": 1e-4, "numeric_embedding": "periodic"},
                      overrides=["train.epochs=7"], note="trial 3")
    assert path.read_text().startswith("# trial 3\n")
    best = load_config(path)  # the certificates and the table found from the run folder
    assert best.model.bottom_hidden == (48, 48) and best.model.dropout == 0.25
    assert best.model.numeric_embedding == "periodic"
    assert best.train.weight_decay == 1e-4 and best.train.optimizer == "adamw" and best.train.epochs == 7
    assert best.data.path == str(tmp_path / "partner.csv") and best.tune.bounds == {"dropout": (0.0, 0.4)}
    assert tomllib.loads(path.read_text())["network"]["peers"] == {"bank": str(tmp_path / "keys" / "bank.pem")}


def test_vsplit_tune_has_help_with_an_example(capsys):
    from vsplit.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["tune", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "Example" in out and "vsplit tune --config" in out
