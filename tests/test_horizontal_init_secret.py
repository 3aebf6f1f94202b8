"""The initial-weights attack on a horizontal split (issue 45), and the secrets that stop it.

The server of a split-learning run receives every client's activations; if it can rebuild the clients' initial
segment from what its own config says (train.seed, the parties' names, the architecture), it inverts the first batch.
The clients' replicated segment is therefore drawn from ``clients.init-seed``, a secret only the clients hold
(vsplit.horizontal.shared_seed), and the server's own segments from its own init seed. That a run as OS processes
still equals its in-process reference given the same secrets: tests/test_horizontal_processes.py (hand_secrets).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
import torch

from vsplit.config import load_config
from vsplit.config.horizontal import horizontal_of
from vsplit.data.sources import read_table
from vsplit.errors import ConfigError
from vsplit.node.aligned import model_settings
from vsplit.node.horizontal import HorizontalNode
from vsplit.party import ComputeParty, LabelParty
from vsplit.pilot.horizontal import prepare_horizontal

#: these tests are about the secrets themselves: real ones, not the suite's zeros (tests/conftest.py)
pytestmark = pytest.mark.real_init_secrets

BANKS = ("bank_1", "bank_2", "bank_3")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three banks, a server and a federated server laid out by the pilot (keys, the clients' shared seed)."""
    root = tmp_path_factory.mktemp("init-secret")
    prepare_horizontal(root, banks=3, port=7850, run_id="secret", rows=40, federated=True)
    return root


def _copy(prepared: Path, tmp_path: Path) -> Path:
    shutil.copytree(prepared, tmp_path / "run")
    return tmp_path / "run"


def _node(root: Path, party: str, *overrides: str) -> HorizontalNode:
    return HorizontalNode(load_config(root / party / "party.toml", overrides=list(overrides)), progress=False)


def _params(modules: dict[str, torch.nn.Module]) -> dict[str, torch.Tensor]:
    return {f"{s}/{k}": v.detach() for s, m in modules.items() for k, v in m.named_parameters()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _rebuilt_by_server(root: Path) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """What the server builds from everything in its own config (train.seed, the names, [model], the segments),
    generously given a client's table too: the clients' initial segment as vsplit drew it before issue 45, and its
    own top as a client who knows train.seed would rebuild it."""
    config = load_config(root / "server" / "party.toml")
    bank = load_config(root / "bank_1" / "party.toml")  # only for the table's path and columns
    h, d = horizontal_of(config), bank.data
    table = read_table(root / "bank_1" / d.path, id_column=d.id_column, features=d.features, label=d.label)
    client = LabelParty(h.client, table, label=d.label, id_column=d.id_column, positive_label=d.positive_label,
                        settings=model_settings(config), seed=config.train.seed)
    server = ComputeParty(config.party.name, settings=model_settings(config), seed=config.train.seed)
    return _params(client.modules_for(h.base)), _params(server.modules_for(h.base))


def test_server_knowing_its_whole_config_cannot_rebuild_the_clients_initial_segment(prepared: Path) -> None:
    guess_client, guess_server = _rebuilt_by_server(prepared)
    bank = _params(_node(prepared, "bank_1").modules)
    assert bank and bank.keys() == guess_client.keys()
    for name in bank:  # not one tensor of the bottom is the one the server can draw
        assert not torch.equal(bank[name], guess_client[name]), name
    server = _params(_node(prepared, "server").modules)
    assert all(not torch.equal(server[k], guess_server[k]) for k in server)  # nor a client the server's top
    # the secret is the clients' alone: never in the server's (or the federated server's) folder
    assert not any(p.name == "clients.init-seed" for party in ("server", "fedserver")
                   for p in (prepared / party).rglob("*"))


def test_every_client_starts_from_the_same_segment_drawn_from_the_clients_secret(prepared: Path,
                                                                                   tmp_path: Path) -> None:
    nodes = {b: _node(prepared, b) for b in BANKS}
    first = _params(nodes["bank_1"].modules)
    assert all(_same(_params(nodes[b].modules), first) for b in BANKS)
    assert len({nodes[b].schema() for b in BANKS}) == 1  # the join's digest agrees
    # the shared secret is what fixes it: another one gives other weights, and another digest (the join refuses)
    root = _copy(prepared, tmp_path)
    (root / "bank_2" / "keys" / "clients.init-seed").unlink()
    (root / "bank_2" / "keys" / "clients.init-seed").write_text("12345\n")
    os.chmod(root / "bank_2" / "keys" / "clients.init-seed", 0o600)
    other = _node(root, "bank_2")
    assert not _same(_params(other.modules), first) and other.schema() != nodes["bank_1"].schema()
    # each client's own randomness (dropout) is its own secret, neither the shared one nor another client's
    own = [nodes[b].init_seed for b in BANKS]
    assert len(set(own)) == 3 and nodes["bank_1"].party is not None and nodes["bank_1"].party.init_seed not in own


def test_a_client_without_the_clients_secret_is_refused_naming_the_fix(prepared: Path, tmp_path: Path) -> None:
    root = _copy(prepared, tmp_path)
    for bank in BANKS:
        (root / bank / "keys" / "clients.init-seed").unlink()
    with pytest.raises(ConfigError, match=r"Copy clients\.init-seed from bank_1's key folder .*keeping mode 0600"):
        _node(root, "bank_2")
    assert not (root / "bank_2" / "keys" / "clients.init-seed").exists()
    _node(root, "bank_1")  # the first client makes it on first use, owner-only
    made = root / "bank_1" / "keys" / "clients.init-seed"
    assert made.stat().st_mode & 0o777 == 0o600
    shutil.copy2(made, root / "bank_3" / "keys" / "clients.init-seed")
    os.chmod(root / "bank_3" / "keys" / "clients.init-seed", 0o644)  # a copy others may read: refused like a key
    with pytest.raises(ConfigError, match="readable by other users"):
        _node(root, "bank_3")


def test_train_seed_set_keeps_the_old_initial_segment_with_a_warning(prepared: Path, tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    root = _copy(prepared, tmp_path)
    (root / "bank_2" / "keys" / "clients.init-seed").unlink()  # not needed: the seed is train.seed
    with caplog.at_level(logging.WARNING):
        node = _node(root, "bank_2", "train.seed=0")
    assert _same(_params(node.modules), _rebuilt_by_server(root)[0])
    assert "invert the first batch" in caplog.text
