"""`vsplit bin` between organizations: a bank and two partners (shop: names shared; telco: anonymous, a minimum bin
size) as three OS processes over mutual TLS give every party the WOE and IV the pooled table gives, the bank its value
report, each party its selection.

The bundled bank sample cut three ways (tests/_three_party_support.py), 1024-bit test keys behind the test-only
variable.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from _pilot_support import free_port, start, wait_all
from _three_party_support import PARTNERS, prepare_three_parties

from vsplit.config.boosting import SMALL_KEYS_ENV
from vsplit.node.woe import load_binning

NAMES = ("bank", *PARTNERS)
GINI = "report_gini = true\n"  # every party: the joint scorecard's stages follow the binning
EXTRA = {"bank": "\n[woe]\nkey_bits = 1024\nfine_bins = 8\nselect_top_k = 2\n" + GINI
                 + "\n[scorecard]\niterations = 4\nkey_bits = 1024\n",
         "shop": "\n[woe]\nkey_bits = 1024\nfine_bins = 8\nshare_names = true\nselect_min_iv = 0.02\n" + GINI,
         "telco": "\n[woe]\nkey_bits = 1024\nfine_bins = 8\nmin_bin_rows = 20\n" + GINI}


@pytest.fixture(scope="module")
def binned(tmp_path_factory):
    root = tmp_path_factory.mktemp("woe-run")
    configs = prepare_three_parties(root, port=free_port(), run_id="woe-tls")
    for name, path in configs.items():
        path.write_text(path.read_text() + EXTRA[name])
    mp = pytest.MonkeyPatch()
    mp.setenv(SMALL_KEYS_ENV, "1")
    try:
        logs = {p: root / f"{p}-bin.log" for p in configs}
        procs = {p: start(["bin", "--config", str(c)], log=logs[p]) for p, c in configs.items()}
        wait_all(procs, logs, timeout=180)
    finally:
        mp.undo()
    return root


def _pooled(root: Path) -> pd.DataFrame:
    tables = [pd.read_parquet(root / n / "data" / "train.parquet") for n in NAMES]
    pooled = tables[0]
    for t in tables[1:]:
        pooled = pooled.merge(t, on="customer_id")
    return pooled.sort_values("customer_id").reset_index(drop=True)


def test_every_party_gets_the_pooled_woe_and_the_bank_every_iv(binned):
    pooled = _pooled(binned)
    y = (pooled["y"].astype(str) == "yes").to_numpy(dtype=float)
    bank = json.loads((binned / "runs" / "woe-tls" / "bank" / "woe.json").read_text())
    by_name = {(t["party"], t["attribute"]): t for t in bank["tables"]}
    checked = 0
    for party in NAMES:
        binning = load_binning(binned / "runs" / "woe-tls" / party, run_id="woe-tls", party=party)
        for k, woe_map in enumerate(binning.maps):
            coarse = woe_map.coarse(pooled[woe_map.name])
            events = np.bincount(coarse, weights=y, minlength=woe_map.n_coarse)
            nonevents = np.bincount(coarse, minlength=woe_map.n_coarse) - events
            pe, pn = events / events.sum(), nonevents / nonevents.sum()
            woe = np.where((events > 0) & (nonevents > 0), np.log(np.maximum(pn, 1e-300) / np.maximum(pe, 1e-300)), 0)
            iv = float(((pn - pe) * woe).sum())
            assert np.abs(woe_map.woe - woe).max() <= 1e-9, (party, woe_map.name)
            assert abs(binning.iv[woe_map.name] - iv) <= 1e-9
            shown = woe_map.name if party != "telco" else f"telco#{k}"
            assert abs(by_name[(party, shown)]["iv"] - iv) <= 1e-9
            assert by_name[(party, shown)]["events"] == events.astype(int).tolist()
            checked += 1
    assert checked == len(bank["tables"]) == 16


def test_the_bank_writes_the_value_report_and_each_party_its_selection(binned):
    folder = binned / "runs" / "woe-tls"
    report = (folder / "bank" / "value_report.md").read_text()
    assert "| 1 | telco | telco#" in report  # the call duration leads, anonymous as telco chose
    assert "shop: balance" in report and "telco: duration" not in report
    assert (folder / "bank" / "iv.png").stat().st_size > 1000
    assert "<table>" in (folder / "bank" / "value_report.html").read_text()
    assert not (folder / "shop" / "value_report.md").exists()
    bank = json.loads((folder / "bank" / "selected.json").read_text())
    assert len(bank["attributes"]) == 2
    shop = json.loads((folder / "shop" / "selected.json").read_text())
    ivs = json.loads((folder / "shop" / "woe.json").read_text())["iv"]
    assert shop["attributes"] == sorted((a for a, v in ivs.items() if v >= 0.02), key=lambda a: -ivs[a])
    assert not (folder / "telco" / "psi-state" / "bin").exists()


def test_the_value_report_compares_the_bank_alone_with_the_joint_scorecard_on_held_out_rows(binned):
    bank = json.loads((binned / "runs" / "woe-tls" / "bank" / "woe.json").read_text())
    gini = bank["gini"]
    assert gini["rows"] == round(0.3 * bank["psi"]["intersection"]) and gini["draws"] > 150
    assert gini["joint"] > gini["bank_only"] + 0.2 and 0 < gini["interval"][0] < gini["difference"]
    assert {"gini train", "gini score"} <= set(bank["seconds"])
    report = (binned / "runs" / "woe-tls" / "bank" / "value_report.md").read_text()
    assert "## Scorecard: the bank alone against the joint one" in report and f"{gini['joint']:.4f}" in report
