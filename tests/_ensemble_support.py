"""A small ensemble run (``[model] kind = "ensemble"``) of the bank and two partners, and its in-memory twin.

The three-way partition of the bundled bank sample (tests/_three_party_support.py) cut to the bank's first ``ROWS``
training and ``TEST`` test customers (each partner knows most of them, not all), the plain small network
(tests/_plain.py) for ``EPOCHS`` epochs in a bag of ``NETWORKS``, ``TREES`` trees of depth ``DEPTH`` on 1024-bit test
keys (the test-only variable), a fifth of the bank's rows set aside to choose the weight, then both parts refitted on
every row. :func:`in_memory` is :class:`vsplit.ensemble.SplitEnsemble` with the same rows, seeds and settings.
"""

from __future__ import annotations

import warnings
from pathlib import Path

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


def prepare(root: Path, run_id: str) -> dict[str, Path]:
    """The configs and tables: the bank's first ``ROWS`` training and ``TEST`` test customers; the ``k``-th party
    of :data:`NAMES` drops the first ``20 * k`` of them."""
    configs = prepare_three_parties(root, port=free_port(), run_id=run_id, extra=EXTRA)
    for split, rows in (("train", ROWS), ("test", TEST)):
        keep = pd.read_parquet(root / "bank" / "data" / f"{split}.parquet")["customer_id"].head(rows)
        for k, name in enumerate(NAMES):
            path = root / name / "data" / f"{split}.parquet"
            table = pd.read_parquet(path)
            table[table["customer_id"].isin(keep.iloc[20 * k:])].reset_index(drop=True).to_parquet(path, index=False)
    return configs


def views(root: Path, split: str) -> dict[str, pd.DataFrame]:
    return {n: pd.read_parquet(root / n / "data" / f"{split}.parquet") for n in NAMES}


def in_memory(root: Path) -> object:
    """:class:`~vsplit.ensemble.SplitEnsemble` on the same tables, seeds and settings, with one torch thread as the
    party processes."""
    from vsplit.ensemble import SplitEnsemble

    trees = {"n_estimators": TREES, "max_depth": DEPTH, "max_bins": BINS, "key_bits": 1024,
             "insecure_small_key_for_tests": True}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # customers a partner does not know
            return SplitEnsemble(networks=NETWORKS, trees=trees, weight_fraction=FRACTION, label_party="bank",
                                 label="y", positive_label="yes", random_state=0,
                                 **{**PLAIN, "epochs": EPOCHS}).fit(views(root, "train"))
    finally:
        torch.set_num_threads(threads)
