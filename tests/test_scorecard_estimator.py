"""vsplit.SplitScorecard in a notebook: scikit-learn conventions, and its points, probabilities and coefficients
agree with the pooled run of its own WOE columns.

Two parties, 400 customers (the partner knows 360 of them), a 1024-bit test key.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from vsplit import DataError, SplitScorecard
from vsplit.scorecard import ScorecardParams, columns_from_maps, fit_pooled, sigmoid

pytest.importorskip("heu")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _views(rows: int = 400) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(3)
    ids = [f"c{i}" for i in range(rows)]
    age, spend, job = rng.normal(size=rows), rng.normal(size=rows), rng.choice(["a", "b", "c"], size=rows)
    y = (age + spend + (job == "a") + rng.normal(size=rows) > 0.5).astype(int)
    bank = pd.DataFrame({"customer_id": ids, "age": age, "job": job, "y": y})
    shop = pd.DataFrame({"customer_id": ids[::-1], "spend": spend[::-1]}).iloc[:360]
    return {"bank": bank, "shop": shop}


@pytest.fixture(scope="module")
def fitted():
    card = SplitScorecard(fine_bins=5, iterations=15, key_bits=1024, insecure_small_key_for_tests=True, reasons=2,
                          share_names=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return card.fit(_views())


def test_parameters_follow_scikit_learn(fitted):
    params = fitted.get_params()
    assert params["iterations"] == 15 and params["pdo"] == 20.0
    assert not hasattr(clone(fitted), "coef_")  # clone keeps the parameters, not what fit learned


def test_coefficients_equal_the_pooled_run_and_points_give_the_probabilities(fitted):
    views = _views()
    rows = fitted.rows_
    x = np.hstack([columns_from_maps(fitted.maps_[n], views[n].iloc[rows[n]].reset_index(drop=True)).matrix()
                   for n in ("bank", "shop")])
    y = views["bank"]["y"].to_numpy(float)[rows["bank"]]
    coef, intercept = fit_pooled(x, y, params=ScorecardParams(iterations=15))
    assert np.abs(np.concatenate([fitted.coef_["bank"], fitted.coef_["shop"]]) - coef).max() < 1e-6
    assert abs(fitted.intercept_ - intercept) < 1e-6
    with pytest.warns(UserWarning, match="40 customers of 'bank' are unknown to a partner"):
        proba = fitted.predict_proba(views)[:, 1]
    points = fitted.points(views)
    assert np.isnan(proba).sum() == 40 and points["score"].isna().sum() == 40
    known = ~np.isnan(proba)
    np.testing.assert_allclose(proba[known], sigmoid(fitted.scaling_.log_odds(points["score"][known])))
    total = fitted.base_points_ + points["points_bank"] + points["points_shop"]
    np.testing.assert_allclose(total[known], points["score"][known])
    assert points.loc[known, "reasons"].str.contains("shop:spend").any()  # the shop shares its names here


def test_a_view_without_partner_is_refused():
    with pytest.raises(DataError, match="no partner view"):
        SplitScorecard(key_bits=1024, insecure_small_key_for_tests=True).fit({"bank": _views()["bank"]})
