"""A small ensemble run (``[model] kind = "ensemble"``) of the bank and two partners, and its in-memory twin.

The three-way partition of the bundled bank sample (tests/_three_party_support.py) cut to the bank's first ``ROWS``
training and ``TEST`` test customers (each partner knows most of them, not all), the plain small network
(tests/_plain.py) for ``EPOCHS`` epochs in a bag of ``NETWORKS``, ``TREES`` trees of depth ``DEPTH`` on 1024-bit test
keys (the test-only variable), a fifth of the bank's rows set aside to choose the weight, then both parts refitted on
every row. :func:`in_memory` is :class:`vsplit.ensemble.SplitEnsemble` with the same rows, seeds and settings.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from _pilot_support import free_port
from _plain import PLAIN_SET
from _three_party_support import COLUMNS, prepare_three_parties

from vsplit.models.recipe import PLAIN

NAMES = tuple(COLUMNS)
ROWS, TEST = 500, 200
EPOCHS, NETWORKS, TREES, DEPTH, BINS, FRACTION = 2, 2, 3, 3, 8, 0.2
EXTRA = f"""
[model]
kind = "ensemble"

[train]
epochs = {EPOCHS}

[boosting]
trees = {TREES}
max_depth = {DEPTH}
max_bins = {BINS}
key_bits = 1024

[ensemble]
networks = {NETWORKS}
weight_fraction = {FRACTION}
"""
#: the plain network's keys (the file's [train] epochs stay)
SETS = [x for item in PLAIN_SET for x in ("--set", item)]


def prepare(root: Path, run_id: str, *, extra: str | None = None) -> dict[str, Path]:
    """The configs (``extra``: their added sections, default :data:`EXTRA`) and tables: the bank's first ``ROWS``
    training and ``TEST`` test customers; the ``k``-th party of :data:`NAMES` drops the first ``20 * k`` of them."""
    configs = prepare_three_parties(root, port=free_port(), run_id=run_id, extra=EXTRA if extra is None else extra)
    for split, rows in (("train", ROWS), ("test", TEST)):
        keep = pd.read_parquet(root / "bank" / "data" / f"{split}.parquet")["customer_id"].head(rows)
        for k, name in enumerate(NAMES):
            path = root / name / "data" / f"{split}.parquet"
            table = pd.read_parquet(path)
            table[table["customer_id"].isin(keep.iloc[20 * k:])].reset_index(drop=True).to_parquet(path, index=False)
    return configs


def train_then_predict(root: Path, run_id: str, *, extra: str | None = None) -> dict[str, Path]:
    """:func:`prepare` (with ``extra`` as the configs' added sections, default :data:`EXTRA`), ``vsplit train`` at
    every party as OS processes over mutual TLS, then ``vsplit predict``'s code (``PartyNode.predict``, job ``j1``) on
    every party's test table in threads over memory channels; the configs. Needs the test-only key variable set."""
    from _pilot_support import start, wait_all
    from _serving_support import _channels, _in_threads

    from vsplit.config import load_config
    from vsplit.node import PartyNode
    from vsplit.runtime.jobs import PredictJob

    configs = prepare(root, run_id, extra=extra)
    logs = {p: root / f"{p}-train.log" for p in configs}
    # output.baselines: the bank reports its own model (the run's fallback, already scored on the test table)
    procs = {p: start(["train", "--config", str(c), "--quiet", *SETS, "--set", "output.baselines=true"], log=logs[p])
             for p, c in configs.items()}
    wait_all(procs, logs, timeout=240)
    nodes = {p: PartyNode(load_config(c, overrides=SETS[1::2]), progress=False) for p, c in configs.items()}
    channels = _channels()
    _in_threads({p: (lambda p=p: nodes[p].predict(root / p / "data" / "test.parquet", channels=channels[p],
                                                   job=PredictJob.open(nodes[p].folder, "j1"))) for p in configs})
    return configs


def predicted(root: Path, run_id: str) -> tuple[pd.DataFrame, pd.Series, dict[str, pd.DataFrame], pd.Series]:
    """The bank's ``predictions.csv`` of job ``j1`` (by ID), its scored probabilities, the test views and the bank's
    test IDs in its order."""
    got = pd.read_csv(root / "runs" / run_id / "bank" / "predictions" / "j1" / "predictions.csv",
                      dtype={"customer_id": str}).set_index("customer_id")
    test = views(root, "test")
    return got, got[got["status"] == "scored"]["probability"], test, test["bank"]["customer_id"].astype(str)


def views(root: Path, split: str) -> dict[str, pd.DataFrame]:
    return {n: pd.read_parquet(root / n / "data" / f"{split}.parquet") for n in NAMES}


def in_memory(root: Path, *, order_categories: bool = False, weight_rule: str = "best") -> object:
    """:class:`~vsplit.ensemble.SplitEnsemble` on the same tables, seeds and settings, with one torch thread as the
    party processes (``order_categories``: the trees' option, as ``[boosting] order_categories``; ``weight_rule``:
    as ``[ensemble] weight_rule``)."""
    from vsplit.ensemble import SplitEnsemble

    trees = {"n_estimators": TREES, "max_depth": DEPTH, "max_bins": BINS, "key_bits": 1024,
             "insecure_small_key_for_tests": True}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # customers a partner does not know
            return SplitEnsemble(networks=NETWORKS, trees=trees, weight_fraction=FRACTION, label_party="bank",
                                 order_categories=order_categories, weight_rule=weight_rule,
                                 label="y", positive_label="yes", random_state=0,
                                 **{**PLAIN, "epochs": EPOCHS}).fit(views(root, "train"))
    finally:
        torch.set_num_threads(threads)


@dataclass
class Served:
    """What the bank's live service answered for every test customer, beside ``vsplit predict``'s job ``j1``."""

    version: Any
    scored: list
    served: pd.Series
    expected: pd.Series
    taps: dict
    daemons: dict
    batches: int
    #: the bank's scorer, and the rows it scored (in ``scored``'s order)
    scorer: Any = None
    rows: list = field(default_factory=list)


@contextlib.contextmanager
def served(root: Path, run: str) -> Iterator[Served]:
    """The bank's scorer and the partners' daemons of run ``run`` joined in one process over memory links (live
    mode), every bank test customer scored in batches of 64; the links closed on exit."""
    from _serving_support import close_joined, joined_in_memory

    from vsplit.serve.scorer import Row

    common = [*(SETS[1::2]), 'serve.table="data/test.parquet"', "serve.mode=live"]
    taps: dict = {}
    daemons: dict = {}
    try:
        scorer, taps, daemons = joined_in_memory(root / "bank" / "party.toml",
                                                 {p: root / p / "party.toml" for p in NAMES[1:]}, common)
        version = scorer.model
        test = pd.read_parquet(root / "bank" / "data" / "test.parquet")
        rows = [Row(id=str(r["customer_id"]), features={c: (r[c].item() if hasattr(r[c], "item") else r[c])
                                                         for c in version.columns}) for r in test.to_dict("records")]
        scored = [s for at in range(0, len(rows), 64) for s in scorer.score(rows[at:at + 64])]
        batch = pd.read_csv(root / "runs" / run / "bank" / "predictions" / "j1" / "predictions.csv",
                            dtype={"customer_id": str}).set_index("customer_id")
        yield Served(version=version, scored=scored, served=pd.Series({s.id: s.score for s in scored
                                                                        if s.model == "split"}),
                     expected=batch[batch["status"] == "scored"]["probability"], taps=taps, daemons=daemons,
                     batches=-(-len(rows) // 64), scorer=scorer, rows=rows)
    finally:
        close_joined(taps, daemons)
