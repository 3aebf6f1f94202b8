"""A model saved under other defaults keeps its meaning: when the default recipe changes (issue 25: the plain bottom
of 64 became the recipe's 128 with numeric embeddings), a party's ``model.npz`` trained before is rebuilt with the
architecture it records, not with today's defaults, and scores exactly as it did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from vsplit.config import load_config
from vsplit.node import PartyNode

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
[network.peers]
partner = "keys/partner.pem"
[output]
dir = "runs"
run_id = "old"
"""
#: the plain network, as a config written before the default recipe spelled it (vsplit.models.recipe.PLAIN)
PLAIN = '\n[model]\nnumeric_embedding = "none"\nbottom_hidden = [64]\ntop_hidden = [32]\ndropout = 0.0\n'


def _folder(root: Path, text: str) -> Path:
    root.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    pd.DataFrame({"customer_id": np.arange(60), "age": rng.normal(40, 9, 60), "income": rng.gamma(2, 900, 60),
                  "y": rng.integers(0, 2, 60)}).to_csv(root / "bank.csv", index=False)
    (root / "keys").mkdir(exist_ok=True)
    for name in ("bank.key", "bank.pem", "partner.pem"):
        (root / "keys" / name).write_text("-")
    (root / "party.toml").write_text(text)
    return root / "party.toml"


def _bottom(node: PartyNode) -> torch.nn.Module:
    (module,) = [m for s, m in node._segments().items() if s != "top"]
    return module


def test_a_model_saved_under_the_plain_defaults_loads_as_trained_under_the_recipe_defaults(tmp_path):
    old = PartyNode(load_config(_folder(tmp_path, BANK + PLAIN)))
    with torch.no_grad():
        for p in _bottom(old).parameters():
            p.add_(0.1)  # "trained": not the fresh initialisation either node would draw
    old.save_model()
    inputs = old.party.inputs
    expected = _bottom(old).eval()(*inputs)

    new = PartyNode(load_config(_folder(tmp_path, BANK)))  # the same config without [model]: today's defaults
    assert new.party.settings.bottom_hidden == (128,) and new.party.numeric_kind == "piecewise"
    new.load_model()
    assert new.party.settings.bottom_hidden == (64,) and new.party.settings.top_hidden == (32,)
    assert new.party.numeric_kind == "none" and new.party.settings.dropout == 0.0
    torch.testing.assert_close(_bottom(new).eval()(*inputs), expected, rtol=0, atol=0)
