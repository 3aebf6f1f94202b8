"""The stability report of a fitted split estimator between training rows and new rows, in one process: every
party's columns, every party's embedding dimensions and the score (:mod:`vsplit.monitor.stability`).

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.estimator import SplitClassifier
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(300)]
    >>> x, age = rng.normal(size=300), rng.normal(size=300)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": (x + age > 0).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids, "x": x})}
    >>> clf = SplitClassifier(epochs=2, random_state=0, embedding_width=2).fit(views)
    >>> table = split_stability(clf, views, views)
    >>> table[["party", "name", "kind"]].values.tolist()[:3], float(table["stability"].max())
    ([['bank', 'age', 'feature'], ['bank', 'embedding[0]', 'embedding'], ['bank', 'embedding[1]', 'embedding']], 0.0)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from vsplit.monitor.embeddings import embedding_frame
from vsplit.monitor.stability import band, population_stability, stability_table

COLUMNS = ["party", "name", "kind", "stability", "band"]


def party_stability(party: Any, modules: Mapping[str, Any], sources: list[str], expected: pd.DataFrame,
                    actual: pd.DataFrame, *, bins: int = 10) -> pd.DataFrame:
    """One party's own stability rows: its feature columns and its source segments' embedding dimensions."""
    if not party.feature_columns:
        return pd.DataFrame(columns=COLUMNS)
    categorical = list(party.preprocessor.categorical_)
    parts = [stability_table(expected[party.feature_columns], actual[party.feature_columns], kind="feature",
                             categorical=categorical, bins=bins)]
    for seg in sources:
        module = modules[seg]
        before = embedding_frame(module, party.prepare(expected)[1])
        after = embedding_frame(module, party.prepare(actual)[1])
        if len(sources) > 1:
            before, after = before.add_prefix(f"{seg}."), after.add_prefix(f"{seg}.")
        parts.append(stability_table(before, after, kind="embedding", bins=bins))
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "party", party.name)
    return out[COLUMNS]


def score_stability(expected: Any, actual: Any, *, party: str, bins: int = 10) -> pd.DataFrame:
    """The score's stability row (probabilities of the training rows against the new rows'; rows the split could
    not score, NaN, are left out: they are no part of the score's population)."""
    expected, actual = np.asarray(expected, dtype=float), np.asarray(actual, dtype=float)
    value = population_stability(expected[np.isfinite(expected)], actual[np.isfinite(actual)], bins=bins)
    return pd.DataFrame([{"party": party, "name": "score", "kind": "score", "stability": value,
                          "band": band(value)}], columns=COLUMNS)


def split_stability(estimator: Any, expected: Mapping[str, pd.DataFrame], actual: Mapping[str, pd.DataFrame], *,
                    bins: int = 10) -> pd.DataFrame:
    """Every party's stability rows and the score's, between ``expected`` (training views) and ``actual``."""
    est = estimator
    parties = [est.label_party_, *est.feature_parties_.values()]
    parts = []
    for party in parties:
        sources = [s.name for s in est.topology_.sources_of(party.name)]
        parts.append(party_stability(party, est.modules_, sources, expected[party.name], actual[party.name],
                                     bins=bins))
    with warnings.catch_warnings():  # customers a partner does not know have no score: left out below, on purpose
        warnings.filterwarnings("ignore", message=".*unknown to a partner")
        before, after = est.predict_proba(expected), est.predict_proba(actual)
    column = before.shape[1] - 1
    parts.append(score_stability(before[:, column], after[:, column], party=est.label_party, bins=bins))
    return pd.concat([p for p in parts if len(p)], ignore_index=True)
