"""Issue 45, finding 3: each party's initial weights come from a secret only it holds (vsplit.models.secret).

A label party knows everything in its own config: the partner's name, the architecture, ``train.seed`` and the
default seeds. From that alone it rebuilt a partner's initial bottom bit for bit and inverted the first batch of
activations it received. These tests show it cannot any more, that the secret lives in the party's own folder like
a key, and that the same secrets give the same model between organizations as in one process."""

from __future__ import annotations

import logging
import threading

import pytest
import torch
from _pilot_support import small

from vsplit.config import load_config
from vsplit.datasets import preset
from vsplit.errors import ConfigError
from vsplit.estimator import SplitClassifier
from vsplit.models import secret
from vsplit.node import PartyNode
from vsplit.node.aligned import model_settings
from vsplit.party import FeatureParty
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.prepare import export_tables
from vsplit.transport.memory import memory_pair

#: these tests are about the secrets themselves: real ones, not the suite's zeros (tests/conftest.py)
pytestmark = pytest.mark.real_init_secrets

#: a tiny model and one epoch: a run of a second
FAST = ["train.epochs=1", "model.dropout=0.0", 'model.numeric_embedding="none"', "output.baselines=false",
        'data.test_path=""']


@pytest.fixture(scope="module")
def data():
    return small(preset("secretflow_bank", seed=0), 400, 100)


@pytest.fixture
def root(tmp_path, data):
    write_missing_configs(tmp_path, label=data.label, positive_label=data.positive_label)
    export_tables(data, tmp_path)
    return tmp_path


def config(root, party, *extra):
    return load_config(root / party / "party.toml", overrides=[*FAST, "output.run_id=init-secret", *extra],
                       check_files=False)


def initial_bottom(root, party="partner", *extra) -> dict[str, torch.Tensor]:
    """The partner's bottom as its node builds it, before any training."""
    return {k: v.clone() for k, v in PartyNode(config(root, party, *extra), progress=False).party.model
            .state_dict().items()}


def rebuilt_by_label_party(root, data, *extra) -> dict[str, torch.Tensor]:
    """What the label party rebuilds from its own config: the partner's name, the architecture (its own settings),
    ``train.seed`` and a table with the partner's columns (the issue's attacker used a dummy one)."""
    bank = config(root, "bank", *extra)
    rebuilt = FeatureParty("partner", data.train["partner"], settings=model_settings(bank), seed=bank.train.seed)
    return rebuilt.model.state_dict()


def weights(state) -> list[str]:
    return [k for k, v in state.items() if v.is_floating_point() and v.dim() == 2]


def test_label_party_knowing_its_whole_config_cannot_rebuild_the_partners_initial_bottom(root, data):
    real, rebuilt = initial_bottom(root), rebuilt_by_label_party(root, data)
    assert real.keys() == rebuilt.keys() and weights(real)
    # the same architecture, but not one weight matrix the same: the first batch cannot be inverted
    assert all(real[k].shape == rebuilt[k].shape and not torch.equal(real[k], rebuilt[k]) for k in weights(real))


def test_init_seed_made_owner_only_on_first_use_and_reused(root):
    path = root / "partner" / "keys" / "partner.init-seed"
    assert not path.exists()
    first = initial_bottom(root)
    assert path.is_file() and path.stat().st_mode & 0o777 == 0o600
    kept = path.read_text()
    again = initial_bottom(root)
    assert path.read_text() == kept and 0 <= int(kept) < 2**62
    assert all(torch.equal(first[k], again[k]) for k in first)  # same secret, same initial weights


def test_other_secrets_give_other_initial_weights_and_a_restored_one_the_same(root):
    path = root / "partner" / "keys" / "partner.init-seed"
    secret.write_secret(path, 12345)
    kept = initial_bottom(root)
    path.unlink()
    other = initial_bottom(root)
    assert any(not torch.equal(kept[k], other[k]) for k in weights(kept))
    path.unlink()
    secret.write_secret(path, 12345)  # a backup restored
    restored = initial_bottom(root)
    assert all(torch.equal(kept[k], restored[k]) for k in kept)


def test_init_seed_readable_by_others_refused_naming_the_fix(root):
    path = secret.write_secret(root / "partner" / "keys" / "partner.init-seed", 7)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"readable by other users.*chmod 600"):
        PartyNode(config(root, "partner"), progress=False)


def test_init_seed_file_that_holds_no_seed_refused(root):
    path = secret.write_secret(root / "partner" / "keys" / "partner.init-seed", 7)
    path.write_text("not a number\n")
    with pytest.raises(ConfigError, match="does not hold a seed"):
        PartyNode(config(root, "partner"), progress=False)


def test_setting_train_seed_explicitly_seeds_the_init_from_it_and_warns(root, data, caplog):
    secret._warned.clear()
    with caplog.at_level(logging.WARNING, logger="vsplit.models.secret"):
        real = initial_bottom(root, "partner", "train.seed=0")
    assert "invert the first batch" in caplog.text and 'train.init_seed = "secret"' in caplog.text
    rebuilt = rebuilt_by_label_party(root, data, "train.seed=0")
    assert all(torch.equal(real[k], rebuilt[k]) for k in real)  # what the warning says: a peer can rebuild it
    assert not (root / "partner" / "keys" / "partner.init-seed").exists()
    secret._warned.clear()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="vsplit.models.secret"):
        kept = initial_bottom(root, "partner", "train.seed=0", 'train.init_seed="secret"')
    assert not caplog.text and not all(torch.equal(real[k], kept[k]) for k in real)


def test_nodes_with_their_secrets_reach_the_in_process_run_given_the_same_init_seeds(root, data, one_thread):
    """Two nodes (memory channels, the code a TLS run drives) with secrets 11 and 22, and the estimator told those
    init seeds: the same model bit for bit; ``random_state`` alone (everything from one seed) does not reach it."""
    secret.write_secret(root / "bank" / "keys" / "bank.init-seed", 11)
    secret.write_secret(root / "partner" / "keys" / "partner.init-seed", 22)
    nodes = {p: PartyNode(config(root, p), progress=False) for p in ("bank", "partner")}
    bank_end, partner_end = memory_pair()
    worker = threading.Thread(target=lambda: nodes["partner"].run({"bank": partner_end}))
    worker.start()
    nodes["bank"].run({"partner": bank_end})
    worker.join(timeout=120)
    params = {"label_party": "bank", "label": "y", "positive_label": data.positive_label, "epochs": 1,
              "candidates": "network",
              "dropout": 0.0, "numeric_embedding": "none"}
    clf = SplitClassifier(**params, random_state=0, init_seeds={"bank": 11, "partner": 22}).fit(data.train)
    got = {"bank": nodes["bank"].party.model, "top": nodes["bank"].party.top, "partner": nodes["partner"].party.model}
    want = {"bank": clf.label_party_.model, "top": clf.label_party_.top,
            "partner": clf.feature_parties_["partner"].model}
    for what, module in want.items():
        for key, value in module.state_dict().items():
            assert torch.equal(got[what].state_dict()[key], value), f"{what}: {key} differs"
    plain = SplitClassifier(**params, random_state=0).fit(data.train).feature_parties_["partner"].model.state_dict()
    assert any(not torch.equal(plain[k], want["partner"].state_dict()[k]) for k in weights(plain))


def test_unknown_init_seed_source_refused_naming_the_key(root):
    with pytest.raises(ConfigError, match=r"train.init_seed: must be one of auto, secret, seed; got 'zero'"):
        config(root, "partner", 'train.init_seed="zero"')


def test_a_trial_of_the_label_partys_choosing_starts_the_partner_from_its_secret(root, data):
    """Issue 45's search attack: a trial with lr = 1e-12 keeps the partner's bottom at its initial weights; those
    come from the partner's own secret in every trial, so the label party's rebuild is of no use."""
    pytest.importorskip("optuna")
    from vsplit.tune.trial import TrialNode, trial_config

    partner = config(root, "partner")
    trial = TrialNode(trial_config(partner, {"lr": 1e-12}, number=0), progress=False)
    bottom, rebuilt = trial.party.model.state_dict(), rebuilt_by_label_party(root, data)
    assert trial.init_seed == PartyNode(partner, progress=False).init_seed  # the party's one secret
    assert all(not torch.equal(bottom[k], rebuilt[k]) for k in weights(bottom))


def test_keys_init_seed_makes_the_secret_before_the_first_run_and_keeps_it(root, capsys):
    from vsplit.cli.main import main

    path = root / "partner" / "keys" / "partner.init-seed"
    assert main(["keys", "init-seed", "--config", str(root / "partner" / "party.toml")]) == 0
    assert path.stat().st_mode & 0o777 == 0o600 and "made" in capsys.readouterr().out
    made = path.read_text()
    assert main(["keys", "init-seed", "--config", str(root / "partner" / "party.toml")]) == 0
    assert path.read_text() == made and "kept" in capsys.readouterr().out
    initial_bottom(root)  # a run takes the seed the command made
    assert path.read_text() == made
