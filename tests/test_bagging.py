"""Averaging independently seeded split networks (vsplit.bagging.SplitBag): each network is the SplitClassifier of
its own seed, the split bag equals the same bag trained in one place (also when each network is refitted on all the
rows), and bad settings are refused."""

from __future__ import annotations

import numpy as np
import pytest

from vsplit.bagging import SplitBag
from vsplit.errors import ConfigError
from vsplit.estimator import SplitClassifier

SETTINGS = dict(label_party="bank", label="y", epochs=2, batch_size=64, patience=None, random_state=5,
                numeric_embedding="piecewise", dropout=0.1)


def test_each_network_is_the_classifier_of_its_own_seed_and_the_output_is_their_mean(views, one_thread):
    bag = SplitBag(networks=2, mode="centralized", **SETTINGS).fit(views)
    first = SplitClassifier(mode="centralized", **SETTINGS).fit(views)
    second = SplitClassifier(mode="centralized", **{**SETTINGS, "random_state": 1005}).fit(views)
    p1, p2 = first.predict_proba(views), second.predict_proba(views)
    assert not np.allclose(p1, p2), "the two networks should differ"
    np.testing.assert_allclose(bag.predict_proba(views), (p1 + p2) / 2, rtol=0, atol=1e-12)
    assert bag.evaluate(views)["auc"] != first.evaluate(views)["auc"]


def test_split_bag_equals_the_centralized_bag(views, one_thread):
    split = SplitBag(networks=2, mode="split", **SETTINGS).fit(views)
    pooled = SplitBag(networks=2, mode="centralized", **SETTINGS).fit(views)
    np.testing.assert_allclose(split.predict_proba(views), pooled.predict_proba(views), rtol=0, atol=1e-5)
    assert split.evaluate(views)["auc"] == pytest.approx(pooled.evaluate(views)["auc"], abs=1e-6)


REFIT = {**SETTINGS, "epochs": 4, "patience": 1, "monitor": "val_auc"}


def test_refit_trains_each_network_again_on_every_row_for_the_epochs_its_validation_rows_chose(views, one_thread):
    bag = SplitBag(networks=2, refit=True, mode="centralized", **REFIT).fit(views)
    for i, (clf, epochs) in enumerate(zip(bag.estimators_, bag.epochs_, strict=True)):
        chooser = SplitClassifier(mode="centralized", **{**REFIT, "random_state": 5 + 1000 * i}).fit(views)
        assert epochs == chooser.best_epoch_ + 1
        assert clf.validation_fraction == 0.0 and len(clf.history_) == epochs
        assert "val_auc" not in clf.history_[-1], "the refit has no validation rows: it trains on all of them"
        alone = SplitClassifier(mode="centralized", **{**REFIT, "random_state": 5 + 1000 * i, "epochs": epochs,
                                                       "validation_fraction": 0.0, "patience": None}).fit(views)
        np.testing.assert_allclose(clf.predict_proba(views), alone.predict_proba(views), rtol=0, atol=1e-12)


def test_a_refitted_split_bag_equals_the_refitted_centralized_bag(views, one_thread):
    split = SplitBag(networks=2, refit=True, mode="split", **REFIT).fit(views)
    pooled = SplitBag(networks=2, refit=True, mode="centralized", **REFIT).fit(views)
    assert split.epochs_ == pooled.epochs_
    np.testing.assert_allclose(split.predict_proba(views), pooled.predict_proba(views), rtol=0, atol=1e-5)


def test_refit_without_validation_rows_is_refused():
    with pytest.raises(ConfigError, match="refit=True chooses the epoch count on validation rows"):
        SplitBag(networks=2, refit=True, **{**SETTINGS, "validation_fraction": 0.0})
    with pytest.raises(ConfigError, match="refit must be True or False"):
        SplitBag(networks=2, refit="yes", **SETTINGS)


@pytest.mark.parametrize("networks", [0, -1, 2.0])
def test_a_bad_network_count_is_refused(networks):
    with pytest.raises(ConfigError, match="networks must be an integer of at least 1"):
        SplitBag(networks=networks, **SETTINGS)
