"""Party processes run the defenses their own config names; a defense configured on the wrong side is refused."""

from __future__ import annotations

import threading

import pytest
import torch

from vsplit.config import load_config
from vsplit.datasets import preset
from vsplit.errors import ConfigError
from vsplit.node import PartyNode
from vsplit.pilot.configs import write_missing_configs
from vsplit.pilot.prepare import export_tables
from vsplit.transport.memory import memory_pair


def train_pair(root, run_id, bank_defenses=(), partner_defenses=()):
    overrides = {"bank": [f"output.run_id={run_id}", "train.epochs=2"],
                 "partner": [f"output.run_id={run_id}", "train.epochs=2"]}
    for party, defenses in (("bank", bank_defenses), ("partner", partner_defenses)):
        if defenses:
            overrides[party].append("privacy.defenses=[" + ",".join(f'"{d}"' for d in defenses) + "]")
    nodes = {p: PartyNode(load_config(root / p / "party.toml", overrides=overrides[p], check_files=False),
                          progress=False) for p in ("bank", "partner")}
    bank_end, partner_end = memory_pair()
    results = {}
    worker = threading.Thread(target=lambda: results.update(partner=nodes["partner"].run({"bank": partner_end})))
    worker.start()
    results["bank"] = nodes["bank"].run({"partner": bank_end})
    worker.join(timeout=120)
    return nodes, results


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("parties")
    data = preset("secretflow_bank")
    write_missing_configs(root, label=data.label, positive_label=data.positive_label)
    export_tables(data, root)
    return root


def test_configured_defenses_change_what_crosses_and_off_changes_nothing(root):
    plain, _ = train_pair(root, "plain")
    off, _ = train_pair(root, "off", bank_defenses=["clip_noise:noise_multiplier=0,quantile=1"])
    defended, results = train_pair(root, "defended", bank_defenses=["clip_noise"], partner_defenses=["nopeek"])
    for a, b in zip(plain["partner"].party.model.parameters(), off["partner"].party.model.parameters(), strict=True):
        assert torch.equal(a, b)
    changed = [not torch.equal(a, b) for a, b in zip(plain["partner"].party.model.parameters(),
                                                      defended["partner"].party.model.parameters(), strict=True)]
    assert all(changed)
    assert results["bank"].test is not None and 0.5 < results["bank"].test["auc"] <= 1.0


def test_defense_on_the_wrong_party_is_refused(root):
    with pytest.raises(ConfigError, match=r"privacy\.defenses\[0\]: 'clip_noise' runs at the label party"):
        load_config(root / "partner" / "party.toml", overrides=['privacy.defenses=["clip_noise"]'], check_files=False)
    with pytest.raises(ConfigError, match=r"privacy\.defenses\[0\]: unknown defense 'noise'"):
        load_config(root / "bank" / "party.toml", overrides=['privacy.defenses=["noise"]'], check_files=False)
