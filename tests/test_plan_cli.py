"""`vsplit plan`: the table, the JSON, the plot, and clear errors for a bad model or input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vsplit.cli.main import main

MODELS = str(Path(__file__).with_name("plan_models.py"))


def test_table_names_every_cut_and_the_least_traffic_one(capsys):
    assert main(["plan", "--model", f"{MODELS}:UNet", "--input-shape", "1,3,8,8", "--batch", "4",
                 "--max-client-flops", "1000"]) == 0
    out = capsys.readouterr().out
    # enc1.0 and dec1.0 both send 256 values per sample; the one with less client compute wins
    assert "graph by export" in out and "least traffic: after 'enc1.0'" in out
    assert "best within the client budget: no cut fits" in out
    for cut in ("(input)", "enc1.0", "up@1", "head"):
        assert f"\n{cut} " in out


def test_json_output_of_the_tabular_bottom_model_over_a_link(capsys):
    assert main(["plan", "--model", "vsplit.models.tabular:TabularMLP", "--model-arg", "cardinalities=[3, 5]",
                 "--model-arg", "n_numeric=2", "--model-arg", "out_dim=4", "--input-shape", "1,2:int64",
                 "--input-shape", "1,2", "--bandwidth-mbps", "100", "--rtt-ms", "20", "--rows", "1000000",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["batch"] == 16 and data["link"]["rows"] == 1_000_000
    last = data["rows"][-1]
    assert last["after"] == "mlp" and last["values_forward"] == 4 and last["epoch_seconds"] > 0


def test_plot_is_written(tmp_path, capsys):
    path = tmp_path / "cuts.png"
    assert main(["plan", "--model", f"{MODELS}:Tied", "--input-shape", "4,6", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("spec", "message"), [
    ("no_such_module_xyz:Net", "cannot import 'no_such_module_xyz'"),
    (f"{MODELS}:NoSuchNet", "has no callable 'NoSuchNet'"),
    ("missing/file.py:Net", "no file 'missing/file.py'"),
    ("vsplit.models.tabular", "write MODULE:CALLABLE"),
])
def test_bad_model_path_is_a_clear_error(spec, message, capsys):
    assert main(["plan", "--model", spec, "--input-shape", "1,3,8,8"]) == 1
    assert message in capsys.readouterr().err


def test_input_shape_the_model_rejects_is_a_clear_error(capsys):
    assert main(["plan", "--model", f"{MODELS}:UNet", "--input-shape", "1,5,8,8", "--batch", "4"]) == 1
    err = capsys.readouterr().err
    assert "rejected example inputs of shapes [(4, 5, 8, 8)]" in err and "expects" in err


def test_malformed_input_shape_says_how_to_write_one(capsys):
    assert main(["plan", "--model", f"{MODELS}:UNet", "--input-shape", "1x3x8x8"]) == 1
    assert "e.g. 1,3,64,64" in capsys.readouterr().err
