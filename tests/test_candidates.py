"""``SplitClassifier(candidates="network+scorecard")``: the label party blends the split network with the split
scorecard (mean log-odds) on a small table. The network is the very network of ``candidates="network"`` (same seeds),
the scorecard the very scorecard :class:`vsplit.SplitScorecard` trains alone, and the blend their mean log-odds; the
default trains no scorecard; a setting the scorecard cannot join is refused with the fix."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from vsplit.config.boosting import SMALL_KEYS_ENV
from vsplit.errors import ConfigError

N = 400


def _views() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    ids = [f"c{i}" for i in range(N)]
    a, b, c = rng.normal(size=N), rng.normal(size=N), rng.normal(size=N)
    y = rng.random(N) < 1 / (1 + np.exp(-(1.2 * a + b - 0.8 * c)))
    return {"bank": pd.DataFrame({"customer_id": ids, "a": a, "y": np.where(y, "yes", "no")}),
            "shop": pd.DataFrame({"customer_id": ids[::-1], "b": b[::-1]}),
            "telco": pd.DataFrame({"customer_id": ids, "c": c})}


@pytest.fixture(scope="module")
def fitted(one_thread):
    from vsplit import SplitClassifier

    mp = pytest.MonkeyPatch()
    mp.setenv(SMALL_KEYS_ENV, "1")
    views = _views()
    params = {"epochs": 3, "random_state": 0, "alignment": "join"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tests' 1024-bit key
            both = SplitClassifier(candidates="network+scorecard", **params).fit(views)
            alone = SplitClassifier(**params).fit(views)
            yield both, alone, views
    finally:
        mp.undo()


def test_the_blend_is_the_mean_log_odds_of_the_same_network_and_the_same_scorecard(fitted):
    from vsplit import SplitScorecard
    from vsplit.metrics import roc_auc

    both, alone, views = fitted
    assert alone.scorecard_ is None
    network = alone.predict_proba(views)[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        card = SplitScorecard(alignment="join", key_bits=1024, insecure_small_key_for_tests=True).fit(views)
        scorecard = card.predict_proba(views)[:, 1]
    np.testing.assert_allclose(both.scorecard_.predict_proba(views)[:, 1], scorecard, rtol=0, atol=1e-12)
    p = both.predict_proba(views)[:, 1]
    logit = lambda q: np.log(q / (1 - q))  # noqa: E731
    np.testing.assert_allclose(logit(p), 0.5 * logit(network) + 0.5 * logit(scorecard), rtol=0, atol=1e-9)
    y = (views["bank"]["y"] == "yes").to_numpy().astype(int)
    assert both.evaluate(views)["auc"] == pytest.approx(roc_auc(y, p), abs=1e-12)
    assert not np.allclose(p, network) and not np.allclose(p, scorecard)


def test_explain_says_where_the_scorecards_reasons_are(fitted):
    both, _, views = fitted
    with pytest.raises(ConfigError, match=r"scorecard_\.points\(views\)"):
        both.explain(views)


def test_a_setting_the_scorecard_cannot_join_is_refused_with_the_fix():
    from vsplit import SplitClassifier, SplitRegressor

    views = _views()
    with pytest.raises(ConfigError, match="candidates must be one of"):
        SplitClassifier(candidates="scorecard", epochs=1).fit(views)
    numbers = {**views, "bank": views["bank"].assign(y=np.arange(N, dtype=float))}
    with pytest.raises(ConfigError, match=r"binary label's vertical split.*leave candidates='network'"):
        SplitRegressor(candidates="network+scorecard", epochs=1, alignment="join").fit(numbers)
