"""Compare split training with its two baselines on a preset, with the same code and the same test rows.

All three models are scored on the test customers every party knows (the rows split prediction can score), so the
numbers are comparable. The label-party-only model trains on all of the label party's own customers, as the bank
would on its own.

"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial
from typing import Any

import pandas as pd

from vsplit.bagging import SplitBag
from vsplit.estimator import SplitClassifier

BASELINES = ("split", "label_party_only", "centralized")


def shared_test_views(test: Mapping[str, pd.DataFrame], *, label_party: str, id_column: str) -> dict[str, pd.DataFrame]:
    """The test tables restricted to customers every party knows (the label party's order kept)."""
    shared = set(test[label_party][id_column].astype(str))
    for table in test.values():
        shared &= set(table[id_column].astype(str))
    return {
        name: table[table[id_column].astype(str).isin(shared)].reset_index(drop=True) for name, table in test.items()
    }


def compare(preset: Any, *, modes: tuple[str, ...] = BASELINES, networks: int = 1, refit: bool = False,
            **params: Any) -> dict[str, dict[str, float]]:
    """Train each of ``modes`` on ``preset.train`` and return its test metrics (plus seconds and epochs).

    ``networks`` > 1: each mode is the mean of that many independently seeded networks
    (:class:`vsplit.bagging.SplitBag`); ``refit``: each network fitted again on all the training rows for the
    epoch count its validation rows chose (``SplitBag(refit=True)``, with any ``networks``).
    """
    test = shared_test_views(preset.test, label_party=preset.label_party, id_column=preset.id_column)
    out = {}
    for mode in modes:
        started = time.perf_counter()
        bagged = networks > 1 or refit
        clf = (partial(SplitBag, networks=networks, refit=refit) if bagged else SplitClassifier)(
            label_party=preset.label_party,
            label=preset.label,
            id_column=preset.id_column,
            positive_label=preset.positive_label,
            mode=mode,
            **params,
        ).fit(preset.train)
        metrics = clf.evaluate(test)
        metrics["seconds"] = round(time.perf_counter() - started, 2)
        metrics["epochs"] = len(clf.history_)
        out[mode] = metrics
    return out
