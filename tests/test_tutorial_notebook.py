"""The two-party notebook runs, and says what its run shows: tutorials/two_party_demo.ipynb (executed in a kernel
of this interpreter). Apart from tests/test_tutorials.py (the bank-marketing script) so the two long runs can go to
different test workers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from test_tutorials import EPOCHS, TUTORIALS, bank_customers_the_partner_knows

pytestmark = pytest.mark.timeout(900)


# -- the notebook -------------------------------------------------------------------------------------------------
def kernel_of_this_python(folder: Path) -> KernelManager:
    """A kernel that runs this interpreter (the venv's), whatever kernelspecs the machine has installed."""
    spec = folder / "vsplit-test-python"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "vsplit test", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(folder)])
    # local sockets in our own folder rather than a TCP port
    return KernelManager(kernel_name="vsplit-test-python", kernel_spec_manager=specs, transport="ipc",
                         ip=str(folder / "ipc"))


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    nb = nbformat.read(TUTORIALS / "two_party_demo.ipynb", as_version=4)
    # after the imports, the notebook's models train at most EPOCHS epochs here, as the bank-marketing script's do in
    # tests/test_tutorials.py: the claims below (the split well ahead of the bank alone, every customer scored) already
    # hold then, in a fraction of the time; the cell is run, not kept (the plots' count is of the notebook's cells)
    cap = nbformat.v4.new_code_cell("import functools\n"
                                    f"SplitClassifier = functools.partial(SplitClassifier, epochs={EPOCHS})")
    nb.cells.insert(1 + next(i for i, c in enumerate(nb.cells) if "import SplitClassifier" in c.source), cap)
    figures = folder / "figures.json"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VSPLIT_NOTEBOOK_FIGURES", str(figures))
        # raises CellExecutionError, naming the cell, if any cell fails
        NotebookClient(nb, km=kernel_of_this_python(folder / "kernels"), timeout=600,
                       resources={"metadata": {"path": str(TUTORIALS)}}).execute()
    return {"nb": nb, "figures": json.loads(figures.read_text())}


def test_notebook_is_committed_without_outputs():
    nb = nbformat.read(TUTORIALS / "two_party_demo.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def test_notebook_runs_and_draws_its_plots(notebook):
    assert notebook["figures"]["python"] == sys.executable
    images = [out for cell in notebook["nb"].cells if cell.cell_type == "code" for out in cell.outputs
              if "image/png" in out.get("data", {})]
    assert len(images) == 2  # the loss curve and the ROC curves


def test_notebook_figures_match_its_claims(notebook):
    figures = notebook["figures"]
    assert figures["intersection"] == figures["expected_intersection"] == bank_customers_the_partner_knows("train")
    # bank_marketing_no_duration: no leaking column, a smaller gain that is still there
    assert figures["split_auc"] - figures["bank_alone_auc"] >= 0.05
    # every test customer scored: the ones the partner does not know by the bank's own model
    assert figures["unscored"] == 0
    assert figures["epochs"] <= EPOCHS  # the cap above took
    assert figures["explained"] == 500 and figures["card"]  # the last step: an explanation and the model card
    assert figures["bank_only"] == 9043 - bank_customers_the_partner_knows("test")
