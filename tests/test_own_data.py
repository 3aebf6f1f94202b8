"""A pilot on the user's own FATE-style guest.csv / host.csv runs with configs only, no code change."""

from __future__ import annotations

import threading

import numpy as np

from vsplit.config import load_config
from vsplit.datasets import load
from vsplit.node import PartyNode
from vsplit.transport.memory import memory_pair

GUEST = ["PAY_6", *(f"BILL_AMT{i}" for i in range(1, 7)), *(f"PAY_AMT{i}" for i in range(1, 7))]
HOST = ["LIMIT_BAL", "SEX", "EDUCATION", "MARRIAGE", "AGE", "PAY_0", "PAY_2", "PAY_3", "PAY_4", "PAY_5"]


def test_fate_style_guest_and_host_csv_train_with_configs_only(tmp_path):
    raw = load("default_credit").sample(n=3000, random_state=0).reset_index(drop=True)
    guest = raw[["ID", "default", *GUEST]].set_axis(["id", "y", *(f"x{i}" for i in range(len(GUEST)))], axis=1)
    host = raw[["ID", *HOST]].set_axis(["id", *(f"x{i}" for i in range(len(HOST)))], axis=1)
    host = host.sample(frac=0.9, random_state=1)  # the host knows only some of the guest's customers
    guest.to_csv(tmp_path / "guest.csv", index=False)
    host.to_csv(tmp_path / "host.csv", index=False)
    for name in ("guest", "host"):
        (tmp_path / name).mkdir()
    common = 'run_id = "own-data"\ndir = "../runs"\n[train]\nepochs = 3\n'
    (tmp_path / "guest" / "party.toml").write_text(f"""
[party]
name = "bank"
role = "label"
[data]
path = "../guest.csv"
id_column = "id"
label = "y"
[network]
listen = "127.0.0.1:1"
key = "k"
cert = "c"
peers = {{ partner = "p" }}
[output]
{common}""")
    (tmp_path / "host" / "party.toml").write_text(f"""
[party]
name = "partner"
role = "feature"
[data]
path = "../host.csv"
id_column = "id"
[network]
dial = "127.0.0.1:1"
key = "k"
cert = "c"
peers = {{ bank = "b" }}
[output]
{common}""")
    configs = {p: load_config(tmp_path / f / "party.toml", check_files=False)
               for p, f in (("bank", "guest"), ("partner", "host"))}
    nodes = {p: PartyNode(c, progress=False) for p, c in configs.items()}
    bank_end, partner_end = memory_pair()
    results = {}
    partner = threading.Thread(target=lambda: results.update(partner=nodes["partner"].run({"bank": partner_end})))
    partner.start()
    results["bank"] = nodes["bank"].run({"partner": bank_end})
    partner.join(timeout=120)

    assert results["bank"].psi["train"]["intersection"] == 2700
    assert len(results["bank"].history) == 3
    assert np.isfinite(results["bank"].history[-1]["val_auc"])
    assert (tmp_path / "runs" / "own-data" / "partner" / "model.npz").exists()
