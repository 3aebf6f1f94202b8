"""The public API is small and pinned: changing it is a decision, not an accident."""

from __future__ import annotations

from pathlib import Path

import vsplit
from vsplit.config.load import tomllib  # tomllib, or tomli on Python 3.10

REPO = Path(__file__).resolve().parents[1]


def test_public_api_is_pinned():
    assert sorted(vsplit.__all__) == [
        "AlignmentError", "AuthenticationError", "CheckpointError", "ComputeParty", "ConfigError", "DataError",
        "FeatureParty", "LabelParty", "ModelSettings", "ProtocolError", "RemoteAbort", "SplitBoostClassifier",
        "SplitClassifier", "SplitEnsemble", "SplitRegressor", "SplitScorecard", "Topology", "TrainingHooks",
        "TransportError", "VsplitError", "__version__",
    ]
    for name in vsplit.__all__:
        assert hasattr(vsplit, name), name


def test_every_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "vsplit").rglob("__init__.py")}
    assert found | {"vsplit.datasets"} == listed, "add new packages to [tool.setuptools] packages in pyproject.toml"
