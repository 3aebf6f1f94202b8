"""A small trained boosting run (bank, shop, telco) for the serving and explanation tests, made in one process.

Training and batch prediction run the parties' nodes in threads over memory channels: the same ``BoostNode`` code
``vsplit train`` and ``vsplit predict`` run over mutual TLS (tests/test_boosting_processes.py runs those as
processes). 1024-bit test keys behind the test-only variable; the bank's first ``ROWS`` customers, most of them
known to each partner.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from _pilot_support import free_port
from _serving_support import _channels, _in_threads
from _three_party_support import COLUMNS, PARTNERS, prepare_three_parties

from vsplit.config import load_config, resolve
from vsplit.config.boosting import SMALL_KEYS_ENV

NAMES = ("bank", *PARTNERS)
TREES, DEPTH, BINS = 5, 3, 8
EXTRA = f"""
[model]
kind = "boosting"

[boosting]
trees = {TREES}
max_depth = {DEPTH}
max_bins = {BINS}
key_bits = 1024
"""
ROWS = 900


def prepare(root: Path, run_id: str) -> dict[str, Path]:
    """The configs and tables: the bank's first ``ROWS`` training customers, each partner most of them."""
    configs = prepare_three_parties(root, port=free_port(), run_id=run_id, extra=EXTRA)
    keep = pd.read_parquet(root / "bank" / "data" / "train.parquet")["customer_id"].head(ROWS)
    for name in NAMES:
        path = root / name / "data" / "train.parquet"
        table = pd.read_parquet(path)
        table[table["customer_id"].isin(keep.iloc[40 * NAMES.index(name):])].to_parquet(path, index=False)
    return configs


@contextlib.contextmanager
def small_keys() -> Iterator[None]:
    """1024-bit HE keys allowed (the test-only variable) in this process and the processes it starts."""
    before = os.environ.get(SMALL_KEYS_ENV)
    os.environ[SMALL_KEYS_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SMALL_KEYS_ENV, None)
        else:
            os.environ[SMALL_KEYS_ENV] = before


def train_boosting(root: Path, run_id: str) -> None:
    """Train boosting run ``run_id`` of the three parties under ``root`` (configs written on first use); needs
    :func:`small_keys`."""
    from vsplit.node import PartyNode

    if not (root / "bank" / "party.toml").exists():
        prepare(root, run_id)
    overrides = [f"output.run_id={run_id}", 'data.test_path=""']
    nodes = {p: PartyNode(load_config(root / p / "party.toml", overrides=overrides), progress=False)
             for p in COLUMNS}
    channels = _channels()
    _in_threads({p: (lambda p=p: nodes[p].run(channels[p])) for p in COLUMNS})


def batch_predict(root: Path, run_id: str) -> pd.DataFrame:
    """``vsplit predict``'s predictions.csv of every bank test customer (each party's test table as input); needs
    :func:`small_keys`."""
    from vsplit.node import PartyNode

    configs = {p: load_config(root / p / "party.toml", overrides=[f"output.run_id={run_id}"]) for p in COLUMNS}
    nodes = {p: PartyNode(c, progress=False) for p, c in configs.items()}
    channels = _channels()
    paths = _in_threads({p: (lambda p=p: nodes[p].predict(resolve(configs[p], "data/test.parquet"),
                                                          channels=channels[p])) for p in COLUMNS})
    return pd.read_csv(paths["bank"], dtype={"customer_id": str})


def explain_batch(root: Path, run_id: str, *, job: str = "batch") -> Path:
    """``vsplit explain`` of every party's test table (the parties' nodes in threads over memory channels); the
    bank's job folder (explanations.csv, reasons.json); needs :func:`small_keys`."""
    from vsplit.explain.process import explain_party

    configs = {p: load_config(root / p / "party.toml", overrides=[f"output.run_id={run_id}"]) for p in COLUMNS}
    channels = _channels()
    paths = _in_threads({p: (lambda p=p: explain_party(configs[p], resolve(configs[p], "data/test.parquet"),
                                                       job=job, channels=channels[p])) for p in COLUMNS})
    return Path(paths["bank"]).parent
