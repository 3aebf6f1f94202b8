"""One audit for every topology: the command line's --topology, and the vanilla image audit's report and pictures."""

from __future__ import annotations

import json

import pytest

from vsplit.cli.main import main
from vsplit.errors import ConfigError
from vsplit.privacy.topology_audit import ImageAuditSizes, audit_topology

TINY = ImageAuditSizes(inversion_epochs=1, targets=4, white_box_steps=50, black_box_epochs=5, fsha_runs=1,
                       honest_runs=1, fsha_epochs=4, cuts=("layers",))


def test_the_vanilla_image_audit_writes_tables_json_and_both_pictures(tmp_path, one_thread):
    report = audit_topology("vanilla", "digits", defenses=["none"], seeds=1, sizes=TINY)
    text = report.table()
    assert "Inversion of the client's activations" in text and "gradient_scrutinizer" in text
    paths = report.write(tmp_path)
    assert {p.name for p in paths.values()} == {"report.md", "report.json", "inversion_by_cut.png", "fsha.png"}
    document = json.loads((tmp_path / "report.json").read_text())
    assert document["inversion"]["rows"][0]["cut"] == "layers"
    summary = document["detectors"]["summary"]
    assert set(summary) == {"gradient_scrutinizer", "splitguard", "splitout"}
    scrutinizer = summary["gradient_scrutinizer"]
    assert scrutinizer["fsha_detected"] == 1 and scrutinizer["false_alarms"] == 0


def test_the_vanilla_tabular_audit_measures_the_servers_reconstruction_of_the_clients_columns(monkeypatch,
                                                                                              one_thread):
    import vsplit.datasets
    from vsplit.privacy.synthetic import make_imbalanced_views, split_views
    from vsplit.privacy.topology_audit import vanilla_tabular_audit

    train, test = split_views(make_imbalanced_views(1500, seed=0), seed=0)

    class Synthetic:  # what the audit reads of a preset, on the small synthetic set
        id_column, label, positive_label = "customer_id", "y", 1

        def pooled(self, split):
            views = train if split == "train" else test
            return views["bank"].merge(views["partner"], on="customer_id")

    monkeypatch.setattr(vsplit.datasets, "preset", lambda name, seed: Synthetic())
    # the batch the threshold was set with: left out, a small table's batch is halved (vsplit.app.session.fitted_batch)
    report = vanilla_tabular_audit("synthetic", defenses=["none", "nopeek"], seeds=[0], epochs=2, batch_size=256)
    rows = {r["defense"]: r for r in report.rows()}
    assert rows["none"]["reconstruction_r2"] > 0.3
    assert rows["nopeek"]["reconstruction_r2"] < rows["none"]["reconstruction_r2"]
    assert "norm_leak_auc" not in rows["none"]  # the server holds the labels: no label attack


def test_unknown_topologies_are_refused():
    with pytest.raises(ConfigError, match="unknown topology"):
        audit_topology("ring", "digits")


def test_the_command_line_routes_each_topology(monkeypatch, capsys):
    import vsplit.privacy.topology_audit as module

    calls = []

    class Fake:
        def table(self):
            return "TABLE"

    def fake(topology, preset, **kwargs):
        calls.append((topology, preset, kwargs["sizes"]))
        return Fake()

    monkeypatch.setattr(module, "audit_topology", fake)
    assert main(["privacy", "audit", "--topology", "u_shaped", "--preset", "digits", "--quick", "--quiet"]) == 0
    assert calls == [("u_shaped", "digits", ImageAuditSizes.quick())] and "TABLE" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["privacy", "audit", "--topology", "ring", "--preset", "digits"])
