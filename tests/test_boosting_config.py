"""``[model] kind = "boosting"`` in a party config: the node it runs, and bad input refused before any peer is
reached (a missing sf-heu names the extra to install; a key under 2048 bits is refused outside tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vsplit.config import load_config
from vsplit.config.boosting import SMALL_KEYS_ENV
from vsplit.errors import ConfigError

BANK = """[party]
name = "bank"
role = "label"

[data]
path = "bank.csv"
label = "y"

[network]
listen = "127.0.0.1:7700"
key = "bank.key"
cert = "bank.pem"
peers = {{ shop = "shop.pem" }}

[model]
kind = "{kind}"

[boosting]
trees = 2
key_bits = {bits}
"""


def _config(folder: Path, *, kind: str = "boosting", bits: int = 2048) -> Path:
    (folder / "bank.csv").write_text("customer_id,age,y\na,30,1\nb,40,0\nc,50,1\n")
    path = folder / "party.toml"
    path.write_text(BANK.format(kind=kind, bits=bits))
    return path


def test_boosting_config_runs_the_boosting_node(tmp_path):
    from vsplit.node import PartyNode
    from vsplit.node.boost import BoostNode

    node = PartyNode(load_config(_config(tmp_path), check_files=False))
    assert isinstance(node, BoostNode) and node.params.trees == 2 and node.feature_columns == ["age"]


def test_key_under_2048_bits_refused_unless_the_test_only_variable_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv(SMALL_KEYS_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"boosting\.key_bits: 1024 bits; keys under 2048 bits are refused"):
        load_config(_config(tmp_path, bits=1024), check_files=False)
    monkeypatch.setenv(SMALL_KEYS_ENV, "1")
    assert load_config(_config(tmp_path, bits=1024), check_files=False).boosting.key_bits == 1024


def test_unknown_model_kind_lists_the_kinds(tmp_path):
    with pytest.raises(ConfigError, match=r"model\.kind: must be one of network, boosting(, \w+)*; got 'forest'"):
        load_config(_config(tmp_path, kind="forest"), check_files=False)


def test_missing_sf_heu_names_the_extra_before_any_peer_is_reached(tmp_path, monkeypatch):
    import vsplit.he._lib as lib
    from vsplit.node import PartyNode

    node = PartyNode(load_config(_config(tmp_path), check_files=False))
    monkeypatch.setattr(lib, "heu_available", lambda: False)
    monkeypatch.setattr(node, "open_channels", lambda *a, **k: pytest.fail("a peer was reached"))
    with pytest.raises(ConfigError, match=r"pip install 'vsplit\[he\]'"):
        node.run()


def test_goss_rates_reach_the_trees_and_half_set_or_too_large_rates_are_refused(tmp_path):
    path = _config(tmp_path)
    config = load_config(path, overrides=["boosting.goss_top_rate=0.2", "boosting.goss_other_rate=0.1",
                                          "train.seed=7"], check_files=False)
    from vsplit.config.boosting import boost_params

    params = boost_params(config)
    assert (params.goss_top_rate, params.goss_other_rate, params.seed) == (0.2, 0.1, 7)
    for rates in (["boosting.goss_top_rate=0.2"], ["boosting.goss_top_rate=0.7", "boosting.goss_other_rate=0.5"]):
        with pytest.raises(ConfigError, match=r"boosting\.goss_top_rate, goss_other_rate"):
            load_config(path, overrides=rates, check_files=False)
