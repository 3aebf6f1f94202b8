"""The bank-only fallback: the label party's own model on its own columns, for customers no partner knows.

Theory of operation. A split model can score only the customers every partner knows. The label party therefore
trains, next to the split, the same network on its own columns alone (the ``label_party_only`` baseline; same
settings, same seeds, in this process, with nothing sent to anyone) and saves it with its run as
``fallback.npz``. At prediction time the customers PSI found unknown to a partner are scored by this model, and
each score says which model made it (:data:`SPLIT` or :data:`BANK_ONLY`). :func:`score_bank_only` is the one call
batch prediction, the notebook estimator and a future online server make.

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.app.session import Schedule
    >>> from vsplit.party import LabelParty
    >>> rng = np.random.default_rng(0)
    >>> table = pd.DataFrame({"customer_id": [str(i) for i in range(64)], "a": rng.normal(size=64),
    ...                       "y": [0, 1] * 32})
    >>> model = train_bank_only(LabelParty("bank", table, label="y"), schedule=Schedule(epochs=1, batch_size=16),
    ...                         session=b"s" * 16)
    >>> score_bank_only(model, table.head(3)).shape
    (3,)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.app.local import run_sessions
from vsplit.app.session import Schedule, score_session, train_session
from vsplit.data.tables import all_ids
from vsplit.errors import CheckpointError
from vsplit.models.recipe import ARCHITECTURE
from vsplit.party import LabelParty, trained_architecture
from vsplit.runtime.checkpoint import interpreting, load_checkpoint, save_checkpoint
from vsplit.topology.graph import Topology

#: the ``model`` column of predictions.csv: which model scored the row
SPLIT, BANK_ONLY = "split", "bank_only"
FILE = "fallback.npz"


@dataclass
class BankOnly:
    """The label party's own trained model: its party (preprocessing and modules) and its one-party topology."""

    party: LabelParty
    run: Topology
    history: list[dict[str, Any]]
    best_epoch: int | None


def own_topology(party: LabelParty) -> Topology:
    """The one-party topology of the bank alone: its bottom and top, no partner."""
    return Topology.vertical(label_party=party.name, feature_parties=[], width=party.settings.embedding_width)


def train_bank_only(party: LabelParty, *, schedule: Schedule, session: bytes) -> BankOnly:
    """Train ``party`` (a freshly built label party) on its own columns alone; return the fitted model."""
    run = own_topology(party)
    own = np.argsort(all_ids(party.ids), kind="stable")
    trained = run_sessions({party.name: train_session(party, run, schedule=schedule, rows=own)},
                           session=session)[party.name].result
    return BankOnly(party=party, run=run, history=trained.history, best_epoch=trained.best_epoch)


def score_bank_only(model: BankOnly, table: pd.DataFrame, *, rows: np.ndarray | None = None,
                    session: bytes = b"vsplit-bank-only") -> np.ndarray:
    """The bank-only model's scores of ``table``'s rows (``rows``: positions in ``table``, default all), in order."""
    ids, inputs = model.party.prepare(table)
    rows = np.arange(len(ids), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.zeros(0, dtype=np.float64)
    scored = run_sessions({model.party.name: score_session(model.party, model.run, (ids, inputs), rows=rows)},
                          session=(session * 16)[:16])
    return np.asarray(scored[model.party.name].result, dtype=np.float64)


def save_bank_only(model: BankOnly, path: Path, *, run_id: str) -> Path:
    """Write the bank-only model (its modules and preprocessing) to ``path`` (atomically)."""
    party = model.party
    state: dict[str, Any] = {
        "party": party.name, "kind": BANK_ONLY,
        "segments": {s: m.state_dict() for s, m in party.modules_for(model.run, task_width=party.task_width).items()},
        "feature_columns": party.feature_columns, "numeric_embedding": party.numeric_kind,
        "settings": {k: getattr(party.settings, k) for k in ARCHITECTURE},
    }
    if party.preprocessor is not None:
        state["preprocessor"] = party.preprocessor.state()
    save_checkpoint(path, state, run_id=run_id, party=party.name)
    return path


def load_bank_only(path: Path, build: Callable[[dict[str, Any]], LabelParty], *, run_id: str,
                   party: str) -> BankOnly | None:
    """The bank-only model saved at ``path``, in the label party ``build(architecture it was trained with)`` returns
    (freshly built from the training table; :func:`~vsplit.party.trained_architecture`), or ``None`` if the run saved
    none (a run without the fallback, or a label party with no columns of its own)."""
    from vsplit.data.preprocess import TablePreprocessor

    if not path.is_file():
        return None
    state = load_checkpoint(path, run_id=run_id, party=party)
    if state.get("kind") != BANK_ONLY:
        raise CheckpointError(f"{path} is not a bank-only fallback model; delete it or train the run again")
    with interpreting(path):
        alone = build(trained_architecture(state))
        if "preprocessor" in state:
            alone.preprocessor = TablePreprocessor.from_state(state["preprocessor"])
        run = own_topology(alone)
        for seg, module in alone.modules_for(run, task_width=alone.task_width).items():
            module.load_state_dict(state["segments"][seg])
    return BankOnly(party=alone, run=run, history=[], best_epoch=None)


@dataclass
class TestCoverage:
    """The bank-only model on a test table: its scores of every row, and metrics of who scored whom."""

    proba: np.ndarray  # the bank-only model's score of every test row, in table order
    coverage: dict[str, Any]  # "all" (split where shared, bank-only elsewhere), "shared" (split), "bank_only"


def cover_test(model: BankOnly, table: pd.DataFrame, rows: np.ndarray, split_proba: np.ndarray) -> TestCoverage:
    """Score every row of the test ``table`` with the bank-only model and report metrics for every customer (the
    split's score on the shared ``rows``, the bank-only score elsewhere), for the shared ones and for the others."""
    party = model.party
    y = party.task.encode_with(table[party.label], party.label_info).numpy()
    alone = score_bank_only(model, table)
    rows = np.asarray(rows, dtype=np.int64)
    others = np.setdiff1d(np.arange(len(table)), rows)
    merged = alone.copy()
    merged[rows] = split_proba

    def metrics(pick: np.ndarray, proba: np.ndarray) -> dict[str, Any]:
        return {**party.task.metrics(y[pick], proba), "n_scored": len(pick)}

    coverage: dict[str, Any] = {"all": metrics(np.arange(len(table)), merged), "shared": metrics(rows, split_proba)}
    if len(others):
        coverage["bank_only"] = metrics(others, alone[others])
    return TestCoverage(proba=alone, coverage=coverage)


def score_unknown(model: BankOnly | None, table: pd.DataFrame, *, id_column: str,
                  scored: Mapping[str, float]) -> dict[str, float]:
    """The bank-only scores of the customers of ``table`` that the split did not score (those not in ``scored``, a
    partner does not know them), by ID; empty without a fallback model. Serving calls this for such a customer."""
    if model is None:
        return {}
    ids = [str(v) for v in table[id_column]]
    left = np.asarray([i for i, v in enumerate(ids) if v not in scored], dtype=np.int64)
    proba = score_bank_only(model, table, rows=left)
    return {ids[r]: float(p) for r, p in zip(left.tolist(), proba.tolist(), strict=True)}
