"""Config errors: each a clear message naming the key, all reported at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from vsplit.cli.main import main
from vsplit.config import load_config
from vsplit.errors import ConfigError
from vsplit.estimator import SplitClassifier
from vsplit.models.recipe import RECIPE

REPO = Path(__file__).resolve().parents[1]


def write(folder: Path, text: str) -> Path:
    path = folder / "party.toml"
    path.write_text(text)
    (folder / "partner.csv").write_text("customer_id,x\n1,2\n")
    (folder / "keys").mkdir(exist_ok=True)
    for name in ("partner.key", "partner.pem", "bank.pem"):
        (folder / "keys" / name).write_text("-")
    return path


PARTNER = """
[party]
name = "partner"
role = "feature"
[data]
path = "partner.csv"
[network]
dial = "127.0.0.1:7700"
key = "keys/partner.key"
cert = "keys/partner.pem"
peers = { bank = "keys/bank.pem" }
"""


def test_minimal_partner_config_loads_with_defaults(tmp_path):
    config = load_config(write(tmp_path, PARTNER))
    assert config.model.embedding_width == 16 and config.output.dir == "runs"
    # no [model] or [train] table: the default recipe, the same values the estimator's defaults have
    assert config.train.epochs == RECIPE["epochs"] == SplitClassifier().epochs == 40
    model = config.model
    assert (model.bottom_hidden, model.top_hidden, model.numeric_embedding) == ((128,), (64,), "auto")
    assert (config.train.optimizer, config.train.weight_decay, config.train.monitor) == ("adamw", 1e-4, "auto")


def test_missing_config_file_names_the_path(tmp_path):
    with pytest.raises(ConfigError, match=r"config file .*nope\.toml not found; pass --config"):
        load_config(tmp_path / "nope.toml")


def test_unknown_key_is_named_with_the_valid_ones(tmp_path):
    path = write(tmp_path, PARTNER + "[train]\nepoch = 5\n")
    with pytest.raises(ConfigError, match=r"train\.epoch: unknown key; did you mean train\.epochs\? valid keys here: "
                                          r"batch_size, ema, epochs"):
        load_config(path)


def test_wrong_type_is_named(tmp_path):
    path = write(tmp_path, PARTNER + "[train]\nepochs = \"five\"\nlr = \"fast\"\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert "2 problems" in text  # all at once
    assert "train.epochs: expected an integer, got 'five'" in text and "train.lr: expected a number" in text


def test_peer_certificate_missing_names_the_peer_and_the_fix(tmp_path):
    path = write(tmp_path, PARTNER)
    (tmp_path / "keys" / "bank.pem").unlink()
    with pytest.raises(ConfigError, match=r"network\.peers\.bank: certificate not found at .*bank\.pem; ask bank"):
        load_config(path)


def test_label_column_configured_on_the_partner(tmp_path):
    path = write(tmp_path, PARTNER.replace('path = "partner.csv"', 'path = "partner.csv"\nlabel = "y"'))
    with pytest.raises(ConfigError, match=r"data\.label: only the label party holds labels"):
        load_config(path)


VANILLA = "[topology]\nkind = \"vanilla\"\n"


@pytest.mark.parametrize(("extra", "expected"), [
    ('[privacy]\ndetectors = ["gradient_scrutinizer"]\n', "privacy.detectors: only the client of a vanilla split"),
    (VANILLA + '[privacy]\ndetectors = ["gradient_scrutinizer"]\n', "privacy.detector_labels: a vanilla client's"),
    (VANILLA + '[privacy]\ndetectors = ["canary_guard"]\ndetector_labels = "y"\n',
     "privacy.detectors[0]: unknown detector 'canary_guard'; choose from gradient_scrutinizer, splitguard, splitout"),
    (VANILLA + '[privacy]\ndetectors = ["splitguard"]\ndetector_labels = "y"\n',
     "privacy.canary_column: needed with detector 'splitguard'"),
    (VANILLA + '[privacy]\ndetectors = ["splitout:patience=0"]\ndetector_labels = "y"\n',
     "privacy.detectors[0]: splitout: patience and neighbors must be >= 1"),
    (VANILLA + '[privacy]\ndetectors = ["splitout"]\ndetector_labels = "y"\n[train]\npipeline_window = 4\n',
     "privacy.detectors: a client running ahead"),
    ('[privacy]\ncanary_column = "c"\n', "privacy.canary_column: only used with privacy.detectors"),
])
def test_detector_settings_are_checked_where_they_can_run(tmp_path, extra, expected):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, PARTNER + extra))
    assert expected in str(err.value)


def test_a_vanilla_client_with_detectors_loads(tmp_path):
    extra = VANILLA + '[privacy]\ndetectors = ["gradient_scrutinizer", "splitout:patience=5"]\ndetector_labels = "y"\n'
    assert load_config(write(tmp_path, PARTNER + extra)).privacy.detectors == ("gradient_scrutinizer",
                                                                              "splitout:patience=5")


def test_dotted_override_and_bad_override(tmp_path):
    path = write(tmp_path, PARTNER)
    assert load_config(path, overrides=["train.epochs=5", "train.lr=0.01"]).train.epochs == 5
    with pytest.raises(ConfigError, match=r"train\.epochs: expected an integer, got 'many'"):
        load_config(path, overrides=["train.epochs=many"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(path, overrides=["train.epochs"])


def test_cli_reports_config_errors_with_exit_code_1(tmp_path, capsys):
    path = write(tmp_path, PARTNER + "[train]\nbatch_size = 0\n")
    assert main(["train", "--config", str(path)]) == 1
    assert "train.batch_size: must be at least 1" in capsys.readouterr().err


def test_example_party_configs_are_valid():
    for party in ("bank", "partner"):
        config = load_config(REPO / "parties" / party / "party.toml", check_files=False)
        assert config.party.name == party


@pytest.mark.parametrize("command", ["keys", "psi", "train", "run", "predict", "report", "pilot", "compare"])
def test_every_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert "Example" in capsys.readouterr().out


@pytest.mark.parametrize(("override", "expected"), [
    ('network.allow_from=["10.0.0.0/8", "nonsense"]', r"network\.allow_from: 'nonsense' is not an IP address"),
    ("network.first_record_timeout_s=0", r"network\.first_record_timeout_s: must be above 0 and at most 60 s"),
    ("train.max_abs_activation=-1", r"train\.max_abs_activation: must be a positive number, got -1\.0"),
    ("train.max_abs_gradient=inf", r"train\.max_abs_gradient: must be a positive number, got inf"),
    ("output.log_max_mb=0", r"output\.log_max_mb: must be positive, got 0\.0"),
])
def test_limits_against_strangers_and_hostile_partners_are_checked(tmp_path, override, expected):
    with pytest.raises(ConfigError, match=expected):
        load_config(write(tmp_path, PARTNER), overrides=[override])
    config = load_config(write(tmp_path, PARTNER), overrides=['network.allow_from=["203.0.113.7", "10.1.2.0/24"]'])
    assert config.network.allow_from == ("203.0.113.7", "10.1.2.0/24") and config.train.max_abs_activation == 1e30


def test_data_checks_settings_are_typed_and_bounded(tmp_path):
    typed = write(tmp_path, PARTNER.replace('path = "partner.csv"', 'path = "partner.csv"\ncoerce_numbers = "yes"'))
    with pytest.raises(ConfigError, match=r"data\.coerce_numbers: expected true or false, got 'yes'"):
        load_config(typed)
    bounded = write(tmp_path, PARTNER + "[train]\nmin_class_rows = 0\n")
    with pytest.raises(ConfigError, match=r"train\.min_class_rows: must be at least 1, got 0"):
        load_config(bounded)
