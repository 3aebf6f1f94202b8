"""Data problems a user can cause end in a one-line vsplit error naming the file, column, row and fix; column types
are fixed by rule and reported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import warnings

import numpy as np
import pandas as pd
import pytest
from _plain import PLAIN_SET
from conftest import make_views

from vsplit.config import load_config
from vsplit.data.preprocess import TablePreprocessor
from vsplit.errors import ConfigError, DataError
from vsplit.node import PartyNode
from vsplit.transport.memory import memory_pair


def party_toml(name: str, *, run_id: str, data: str = "") -> str:
    """The config of the bank (label party, listening) or the partner (dialing it); placeholder key files."""
    bank = name == "bank"
    network = 'listen = "127.0.0.1:7700"' if bank else 'dial = "127.0.0.1:7700"'
    label = 'label = "y"\n' if bank else ""
    return (f'[party]\nname = "{name}"\nrole = "{"label" if bank else "feature"}"\n[data]\npath = "{name}.csv"\n'
            f'{label}{data}\n[network]\n{network}\nkey = "k"\ncert = "c"\n'
            f'peers = {{ {"partner" if bank else "bank"} = "k" }}\n[output]\ndir = "runs"\nrun_id = "{run_id}"\n'
            f"baselines = false\n[train]\nepochs = 3\n")


def party_folder(folder, name="bank", *, csv: str | None = None, run_id="r1", data="",
                 table: pd.DataFrame | None = None):
    """A party's folder: its CSV (given as text or a table), a placeholder key file, and its party.toml."""
    folder.mkdir(parents=True, exist_ok=True)
    if table is not None:
        table.to_csv(folder / f"{name}.csv", index=False)
    else:
        (folder / f"{name}.csv").write_text(csv or "")
    for key in "kc":
        (folder / key).write_text("-")
    path = folder / "party.toml"
    path.write_text(party_toml(name, run_id=run_id, data=data))
    return path


# -- through the CLI: one line on stderr, no traceback -----------------------------------------------------------------

GOOD = "customer_id,age,y\n" + "".join(f"C{i},{30 + i % 40},{'yes' if i % 3 else 'no'}\n" for i in range(40))
CASES = {  # each a vsplit process (they start together: ~5 s)
    "empty CSV": ({"csv": ""}, r"bank\.csv: the file is empty \(no header line, no rows\); export the table again"),
    "infinity": ({"csv": GOOD.replace("C5,35,", "C5,inf,")},
                 r"bank\.csv: missing values \(NaN\) in columns \{'age': 1\} \(first 'age': inf at row 6\); "
                 r"infinities count as missing.*missing='impute' \(data\.missing\)"),
    "../ in the run ID": ({"csv": GOOD, "run_id": "../elsewhere"},
                          r"output\.run_id: '\.\./elsewhere' may hold only letters, digits, '\.', '_' and '-'"),
}
IN_PROCESS = {  # the same path, without a process each
    "header only": ("customer_id,age,y\n", r"bank\.csv: has a header line but no rows"),
    "one string": (GOOD.replace("C7,37,", "C7,abc,"),
                   r"bank\.csv: column 'age' is numbers but for 1 text value: 'abc' at row 8; fix those cells, list "
                   r"'age' in data\.categorical if it is a category, or set data\.coerce_numbers = true"),
    "ragged CSV": (GOOD + "C99,1,yes,extra,cells\n", r"bank\.csv: cannot be read as CSV .*export the table again"),
}


@pytest.mark.parametrize("csv, message", IN_PROCESS.values(), ids=IN_PROCESS.keys())
def test_bad_tables_name_the_file_column_and_row(tmp_path, csv, message):
    config = load_config(party_folder(tmp_path, csv=csv), check_files=False)
    with pytest.raises(DataError, match=message):
        PartyNode(config, progress=False)


def test_bad_data_and_names_are_one_line_errors_without_a_traceback(tmp_path):
    runs = {}
    for i, (case, (setup, _)) in enumerate(CASES.items()):
        config = party_folder(tmp_path / f"case{i}", **setup)
        runs[case] = subprocess.Popen([sys.executable, "-m", "vsplit.cli.main", "train", "--config", str(config),
                                       "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for case, proc in runs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (case, out, err)
        # the error (the config's: 2 lines), after at most the notice that the peers are told (vsplit.node.early)
        lines = [line for line in err.strip().splitlines() if not line.startswith("vsplit: bank stops before")]
        assert "Traceback" not in err and len(lines) <= 2, (case, err)
        assert re.search(CASES[case][1], err), (case, err)
    assert not list(tmp_path.rglob("elsewhere"))


def test_a_name_with_a_slash_or_dots_is_refused_for_every_folder_name(tmp_path):
    path = party_folder(tmp_path, csv=GOOD, run_id="ok")
    for override, key in (("party.name=../bank", "party.name"), ("output.run_id=/tmp/x", "output.run_id"),
                          ("output.run_id=..", "output.run_id")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.") + ": .* may hold only letters"):
            load_config(path, overrides=[override], check_files=False)


# -- column types by rule ------------------------------------------------------------------------------------------


def test_a_numeric_column_with_a_stray_string_is_refused_in_a_scoring_table_too():
    prep = TablePreprocessor().fit(pd.DataFrame({"x": [1.0, 2.0, 3.0]}))
    with pytest.raises(DataError, match="column 'x' is numbers but for 1 text value: 'n/a' at row 2"):
        prep.transform(pd.DataFrame({"x": ["1.5", "n/a", "2"]}))
    assert prep.column_types() == {"x": {"type": "numeric", "rule": "float64 dtype"}}


def test_a_text_column_stays_categorical_and_infinity_is_imputed_like_a_hole():
    table = pd.DataFrame({"job": ["a", "b", "7"] * 4, "x": [1.0, np.inf, 3.0] * 4})
    prep = TablePreprocessor(missing="impute").fit(table)
    assert prep.column_types()["job"]["type"] == "categorical" and prep.imputed_ == {"x": 2.0}
    assert np.isfinite(prep.transform(table)[1].numpy()).all()


def _train(root, bank: pd.DataFrame, partner: pd.DataFrame, test: dict[str, pd.DataFrame], data: str):
    """Train bank and partner in one process over memory channels; the bank's result and report."""
    root.mkdir()
    tests = 'test_path = "test.csv"'
    party_folder(root / "bank", table=bank, run_id="types", data=f"{data}\n{tests}")
    party_folder(root / "partner", "partner", table=partner, run_id="types", data=tests)
    for party, table in test.items():
        table.to_csv(root / party / "test.csv", index=False)
    # the plain network: 800 rows compare column handling, which the recipe's noisier fits would blur
    nodes = {p: PartyNode(load_config(root / p / "party.toml", check_files=False, overrides=PLAIN_SET), progress=False)
             for p in ("bank", "partner")}
    bank_end, partner_end = memory_pair()
    thread = threading.Thread(target=lambda: nodes["partner"].run({"bank": partner_end}))
    thread.start()
    result = nodes["bank"].run({"partner": bank_end})
    thread.join(timeout=60)
    return result, json.loads((root / "bank" / "runs" / "types" / "bank" / "report.json").read_text())


def test_coercion_on_request_warns_and_matches_the_clean_column(tmp_path):
    views = make_views(1200, seed=3)
    views["bank"]["age"] = views["bank"]["age"].astype(float)
    train = {p: v.iloc[: len(v) * 2 // 3].reset_index(drop=True) for p, v in views.items()}
    test = {p: v.iloc[len(v) * 2 // 3:].reset_index(drop=True) for p, v in views.items()}
    typo = train["bank"].astype({"age": object})
    typo.loc[10, "age"] = "abc"
    hole = train["bank"].copy()
    hole.loc[10, "age"] = np.nan
    impute = 'missing = "impute"'
    with pytest.warns(UserWarning, match=r"column 'age' is numbers but for 1 text value: 'abc' at row 11; treated as "
                                         r"missing values \(data.coerce_numbers = true\)"):
        coerced, report = _train(tmp_path / "coerced", typo, train["partner"], test,
                                 f"{impute}\ncoerce_numbers = true")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        holed, _ = _train(tmp_path / "hole", hole, train["partner"], test, impute)
    clean, _ = _train(tmp_path / "clean", train["bank"], train["partner"], test, "")
    assert coerced.test["auc"] == holed.test["auc"]  # the string became exactly a missing value
    assert coerced.test["auc"] == pytest.approx(clean.test["auc"], abs=0.02)
    assert report["columns"]["age"] == {"type": "numeric", "rule": "mostly numbers, with stray text",
                                        "imputed_median": pytest.approx(float(hole["age"].median()))}
    assert report["columns"]["job"]["type"] == "categorical"


def test_a_streamed_fit_treats_infinity_as_the_in_memory_fit_does(tmp_path):
    from vsplit.data.stream_fit import fit_parquet

    table = pd.DataFrame({"x": [1.0, 2.0, -np.inf, 4.0, 5.0, 6.0], "job": list("abcabc")})
    table.to_parquet(tmp_path / "t.parquet", row_group_size=2)
    with pytest.raises(DataError, match=r"\{'x': 1\} \(first 'x': -inf at row 3\)"):
        fit_parquet(TablePreprocessor(), tmp_path / "t.parquet", columns=["x", "job"], batch_rows=2)
    streamed = fit_parquet(TablePreprocessor(missing="impute"), tmp_path / "t.parquet", columns=["x", "job"],
                           batch_rows=2)
    fitted = TablePreprocessor(missing="impute").fit(table)
    assert streamed.imputed_ == fitted.imputed_ == {"x": 4.0}
    assert bool((streamed.transform(table)[1] == fitted.transform(table)[1]).all())
