"""``vsplit explain`` and ``vsplit monitor`` as separate OS processes over mutual TLS: a bank and two partners, and a
U-shaped split's client and server.

The bank gets its own columns' attributions, each partner's group and its reason codes; each partner keeps its own
columns' attributions, which add up to the group the bank got; only the partner whose config allows it shares its
top-k column names.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from _pilot_support import free_port, start, wait_all, write_configs
from _three_party_support import COLUMNS, PARTNERS, prepare_three_parties

from vsplit.app.fallback import BANK_MODELS
from vsplit.datasets import preset
from vsplit.pilot.orchestrate import pilot_data
from vsplit.pilot.prepare import ensure_keys, export_tables


def _launch(root, configs, command, tag, extra):
    logs = {p: root / f"{p}-{tag}.log" for p in configs}
    procs = {p: start([*command, "--config", str(c), *extra(p)], log=logs[p]) for p, c in configs.items()}
    return procs, logs


def test_three_processes_explain_over_tls_and_each_partner_keeps_its_own_columns(tmp_path):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="why", extra="[train]\nepochs = 1\n")
    keep = set(pd.read_parquet(tmp_path / "bank" / "data" / "train.parquet")["customer_id"].head(1200))
    for party in configs:  # 1,200 training customers: a fast training run
        path = tmp_path / party / "data" / "train.parquet"
        table = pd.read_parquet(path)
        table[table["customer_id"].isin(keep)].to_parquet(path, index=False)
    configs["shop"].write_text(configs["shop"].read_text() + "\n[explain]\nshare_top_k = 2\n")
    configs["bank"].write_text(configs["bank"].read_text() + '\n[explain]\nsteps = 8\nchunk = 200\nreasons = 3\n'
                               'decline_when = "low"\nfairness_column = "age"\n'
                               'texts = { age = "age of the applicant" }\n')
    procs, logs = _launch(tmp_path, configs, ["train"], "train", lambda p: ["--quiet"])
    wait_all(procs, logs, timeout=180)

    def rows(party):  # every party explains the first 300 rows of its test table
        path = tmp_path / party / "data" / "test.parquet"
        small = tmp_path / party / "data" / "explain.parquet"
        pd.read_parquet(path).head(300).to_parquet(small, index=False)
        return ["--input", str(small), "--job", "j1"]

    procs, logs = _launch(tmp_path, configs, ["explain"], "explain", rows)
    wait_all(procs, logs, timeout=120)

    run = tmp_path / "runs" / "why"
    bank_dir = run / "bank" / "explanations" / "j1"
    table = pd.read_csv(bank_dir / "explanations.csv", dtype={"customer_id": str})  # data.id_column names it
    np.testing.assert_allclose(table["probability"], 1 / (1 + np.exp(-table["score"])), rtol=1e-12)
    np.testing.assert_allclose(table["baseline_probability"], 1 / (1 + np.exp(-table["baseline_score"])), rtol=1e-12)
    own = [c for c in COLUMNS["bank"] if c != "y"]
    assert set(own) <= set(table.columns) and {"party:shop", "party:telco"} <= set(table.columns)
    summary = json.loads((bank_dir / "explain.json").read_text())
    assert summary["rows"] == len(table) > 0 and summary["method"] == "exact"
    assert summary["partners_sharing_top_k"] == ["shop"]
    total = table[[*own, "party:shop", "party:telco"]].sum(axis=1)
    error = np.abs(total - (table["score"] - table["baseline_score"])).max()  # exact: float64 rounding only
    assert error < 1e-9 and summary["completeness_max_error"] < 1e-9
    for partner in PARTNERS:
        mine = pd.read_csv(run / partner / "explanations" / "j1" / "attributions.csv", dtype={"customer_id": str})
        assert sorted(mine.columns[1:]) == sorted(COLUMNS[partner])
        joined = table.set_index("customer_id")[f"party:{partner}"].loc[mine["customer_id"]]
        np.testing.assert_allclose(mine[COLUMNS[partner]].sum(axis=1), joined.to_numpy(), atol=1e-9)
    reasons = json.loads((bank_dir / "reasons.json").read_text())
    texts = {r["text"] for row in reasons for r in row["reasons"]}
    assert all(len(row["reasons"]) <= 3 for row in reasons) and reasons
    assert any(t.startswith("information held by partner shop (mainly ") for t in texts) or \
        not any(r["code"] == "party:shop" for row in reasons for r in row["reasons"])
    assert not any("telco (mainly" in t for t in texts)
    assert (bank_dir / "reasons.csv").is_file()
    # the rows a partner does not know: the bank-only fallback scores them, and gives their reasons (bank columns only)
    alone = summary["bank_only"]
    assert alone["rows"] == 300 - len(table) > 0 and alone["model"] in BANK_MODELS
    theirs = pd.read_csv(bank_dir / "bank_only" / "explanations.csv", dtype={"customer_id": str})
    assert len(theirs) == alone["rows"] and not set(theirs["customer_id"]) & set(table["customer_id"])
    assert not [c for c in theirs.columns if c.startswith("party:")] and set(own) <= set(theirs.columns)
    theirs_total = theirs[own].sum(axis=1)
    assert np.abs(theirs_total - (theirs["score"] - theirs["baseline_score"])).max() < 1e-6
    assert (bank_dir / "bank_only" / "reasons.json").is_file()
    card = (run / "bank" / "model_card.md").read_text()  # written by training, given the importances by explain
    assert "## What drives the score" in card and "| party:shop |" not in card and "| shop |" in card
    assert "## Fairness slices: age" in card and (run / "bank" / "model_card.html").is_file()

    new = {p: ["--input", str(tmp_path / p / "data" / "test.parquet"), "--job", "m"] for p in configs}
    procs, logs = _launch(tmp_path, configs, ["monitor"], "monitor", new.__getitem__)
    wait_all(procs, logs, timeout=120)
    shop = pd.read_csv(run / "shop" / "monitor" / "m" / "stability.csv")
    assert set(shop["kind"]) == {"feature", "embedding"} and (shop["stability"] < 0.25).all()
    assert "stability" in logs["bank"].read_text()


def test_a_u_shaped_split_explains_over_tls_and_the_server_keeps_nothing(tmp_path):
    tables = pilot_data(preset("secretflow_bank", seed=0), "u_shaped")
    roles = {"bank": "label", "cloud": "compute"}
    export_tables(tables, tmp_path)
    ensure_keys(tmp_path, list(roles))
    configs = write_configs(tmp_path, port=free_port(), run_id="u-why", kind="u_shaped", roles=roles,
                            extra="[train]\nepochs = 1\n[explain]\nsteps = 8\n")
    procs, logs = _launch(tmp_path, configs, ["train"], "train", lambda p: ["--quiet"])
    wait_all(procs, logs, timeout=180)
    inputs = {"bank": ["--input", str(tmp_path / "bank" / "data" / "test.parquet"), "--job", "u"],
              "cloud": ["--job", "u"]}
    procs, logs = _launch(tmp_path, configs, ["explain"], "explain", inputs.__getitem__)
    wait_all(procs, logs, timeout=120)
    run = tmp_path / "runs" / "u-why"
    table = pd.read_csv(run / "bank" / "explanations" / "u" / "explanations.csv")
    assert len(table) == len(tables.test["bank"]) and not [c for c in table.columns if c.startswith("party:")]
    cloud = sorted(p.name for p in (run / "cloud" / "explanations" / "u").iterdir())
    assert cloud == ["explain.json"]  # the server keeps no score, attribution or row of its own
    sent = json.loads((run / "cloud" / "explanations" / "u" / "explain.json").read_text())["communication"]["sent"]
    assert set(sent) <= {"KnotActivations", "PieceGradients", "Hello"}
