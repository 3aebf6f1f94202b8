"""The bootstrap intervals' AUC (vsplit.report.credit: scores sorted once, each resample counted by its draws) is
scikit-learn's ROC AUC of the resampled rows, ties and repeated rows included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from vsplit.report.credit import _RankedScores, bootstrap_intervals


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(2, 60), levels=st.integers(1, 8))
def test_the_weighted_auc_is_the_auc_of_the_resampled_rows(seed, rows, levels):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    scores = rng.integers(0, levels, rows) / levels  # few levels: many ties
    pick = rng.integers(0, rows, rows)
    got = _RankedScores(y, scores).auc(np.bincount(pick, minlength=rows).astype(float))
    if len(np.unique(y[pick])) < 2:
        assert np.isnan(got)
    else:
        assert abs(got - roc_auc_score(y[pick], scores[pick])) < 1e-12


def test_the_intervals_hold_the_point_and_repeat_for_a_seed():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500)
    p, baseline = y * 0.4 + rng.random(500), rng.random(500)
    first = bootstrap_intervals(y, p, baseline=baseline, draws=100, seed=7)
    assert first == bootstrap_intervals(y, p, baseline=baseline, draws=100, seed=7)
    assert first["auc"][0] < roc_auc_score(y, p) < first["auc"][1] and first["draws"] == 100
    assert first["gain"][0] < first["gain_point"] < first["gain"][1]
