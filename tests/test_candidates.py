"""``SplitClassifier(candidates=...)``: on a small table the label party blends the split network with the split
scorecard (mean log-odds), by default (``"auto"``). The network is the very network of ``candidates="network"``
(same seeds), the scorecard the very scorecard :class:`vsplit.SplitScorecard` trains alone, and the blend their mean
log-odds; it explains, saves and loads as the blend; ``auto`` trains the network alone on a larger table, in the
pooled mode and where the scorecard cannot be trained (with a warning); an explicit blend the scorecard cannot join is
refused with the fix."""

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
            both = SplitClassifier(**params).fit(views)  # the default, "auto": 400 rows blend
            alone = SplitClassifier(candidates="network", **params).fit(views)
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


def test_auto_blends_a_small_table_and_says_so(fitted):
    from vsplit.candidates import SMALL_TABLE_ROWS, chosen

    both, alone, _ = fitted
    assert both.candidates == "auto" and both.candidates_ == "network+scorecard" and both.scorecard_ is not None
    assert alone.candidates_ == "network"
    assert chosen("auto", rows=SMALL_TABLE_ROWS + 1, applicable=None) == "network"
    assert chosen("auto", rows=400, applicable="no partner") == "network"


def test_the_blend_explains_as_the_mean_of_both_models_and_its_attributions_sum_to_its_score(fitted):
    both, alone, views = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        blended, network = both.explain(views), alone.explain(views)
        points = both.scorecard_.points(views)
    at = pd.Index(views["bank"]["customer_id"]).get_indexer(blended.ids)  # the explained rows, in their order
    assert (at >= 0).all() and blended.ids == network.ids
    p = both.predict_proba(views)[at, 1]
    assert np.abs(blended.completeness_error()).max() < 1e-6
    np.testing.assert_allclose(blended.score, np.log(p / (1 - p)), rtol=0, atol=1e-6)  # the blend's own log-odds
    factor = both.scorecard_.scaling_.factor
    for partner in ("shop", "telco"):  # a partner's group: half the network's, half its points as log-odds
        np.testing.assert_allclose(blended.groups[partner], 0.5 * network.groups[partner]
                                   - 0.5 * points[f"points_{partner}"].to_numpy()[at] / factor, rtol=0, atol=1e-9)
    assert "network+scorecard" in blended.note


def test_a_saved_blend_loads_with_its_scorecard_and_scores_the_same(fitted, tmp_path):
    import pickle

    from vsplit import SplitClassifier

    both, _, views = fitted
    again = SplitClassifier.load(both.save(tmp_path / "blend.vsplit.npz"))
    assert again.candidates_ == "network+scorecard" and again.scorecard_ is not None
    pickled = pickle.loads(pickle.dumps(both))  # the usual tools keep it too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = both.predict_proba(views)
        np.testing.assert_array_equal(again.predict_proba(views), expected)
        np.testing.assert_array_equal(pickled.predict_proba(views), expected)


def test_auto_trains_the_network_alone_on_a_larger_table_and_in_one_place(one_thread, monkeypatch):
    import vsplit.candidates
    from vsplit import SplitClassifier

    views = _views()
    monkeypatch.setattr(vsplit.candidates, "SMALL_TABLE_ROWS", N - 1)
    large = SplitClassifier(epochs=1, random_state=0, alignment="join").fit(views)
    assert large.candidates_ == "network" and large.scorecard_ is None
    monkeypatch.undo()
    pooled = SplitClassifier(epochs=1, random_state=0, alignment="join", mode="centralized").fit(views)
    assert pooled.candidates_ == "network" and pooled.scorecard_ is None


def test_auto_falls_back_to_the_network_with_a_warning_when_the_scorecard_cannot_be_trained(one_thread, monkeypatch):
    from vsplit import SplitClassifier

    monkeypatch.setenv(SMALL_KEYS_ENV, "1")
    views = _views()
    flat = {**views, "telco": views["telco"].assign(c=1.0)}  # one value: the binning refuses the attribute
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        clf = SplitClassifier(epochs=1, random_state=0, alignment="join").fit(flat)
    assert clf.candidates_ == "network" and clf.scorecard_ is None
    assert any("candidates='auto': the split scorecard cannot be trained" in str(w.message) for w in seen)
    with pytest.raises(Exception, match=r"single value|one value|constant"):
        SplitClassifier(candidates="network+scorecard", epochs=1, random_state=0, alignment="join").fit(flat)


def test_a_setting_the_scorecard_cannot_join_is_refused_with_the_fix():
    from vsplit import SplitClassifier, SplitRegressor

    views = _views()
    with pytest.raises(ConfigError, match="candidates must be one of"):
        SplitClassifier(candidates="scorecard", epochs=1).fit(views)
    numbers = {**views, "bank": views["bank"].assign(y=np.arange(N, dtype=float))}
    with pytest.raises(ConfigError, match=r"binary label's vertical split.*set candidates='network'"):
        SplitRegressor(candidates="network+scorecard", epochs=1, alignment="join").fit(numbers)
