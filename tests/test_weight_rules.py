"""The one-standard-error rule for an ensemble's weight (vsplit.weight_rules): the bootstrap AUCs equal
scikit-learn's weighted AUC, the rule keeps the equal blend when the set-aside rows cannot tell it worse and leaves it
when they can, it is seeded, and the estimator and the config refuse an unknown rule naming the choices."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from vsplit.ensemble import WEIGHTS, SplitEnsemble, choose_weight
from vsplit.errors import ConfigError
from vsplit.weight_rules import bootstrap_aucs, one_se_weight, resample_counts


def _parts(rows: int, seed: int, trees_noise: float = 1.0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    return y, y + rng.normal(size=rows), y + trees_noise * rng.normal(size=rows)


def _aucs(y, nets, trees):
    return {w: roc_auc_score(y, w * nets + (1 - w) * trees) for w in WEIGHTS}


def test_bootstrap_aucs_equal_sklearns_weighted_auc_with_ties_and_nan_for_one_class():
    y, nets, _ = _parts(400, 1)
    scores = np.round(nets, 1)  # many ties
    counts = resample_counts(400, 30, seed=2)
    expected = [roc_auc_score(y, scores, sample_weight=c) for c in counts]
    np.testing.assert_allclose(bootstrap_aucs(y, scores, counts), expected, atol=1e-12)
    only_positives = (y == 1).astype(int)[None, :]
    assert np.isnan(bootstrap_aucs(y, scores, only_positives)).all()


def test_equal_parts_keep_the_equal_blend_where_the_best_auc_wanders_off_it():
    picked = {"best": [], "one_se": []}
    for seed in range(8):
        y, nets, trees = _parts(300, seed)  # two parts equally good: the truth is 0.5
        for rule in picked:
            picked[rule].append(choose_weight(y, nets, trees, rule=rule, seed=seed)[0])
    assert all(abs(w - 0.5) <= 0.1 for w in picked["one_se"])
    assert np.mean(np.abs(np.array(picked["one_se"]) - 0.5)) < np.mean(np.abs(np.array(picked["best"]) - 0.5))


def test_a_useless_part_is_weighted_out_when_the_rows_show_it():
    y, nets, _ = _parts(2000, 3)
    noise = np.random.default_rng(4).normal(size=2000)
    assert one_se_weight(y, nets, noise, _aucs(y, nets, noise), seed=0) >= 0.9
    assert one_se_weight(y, noise, nets, _aucs(y, noise, nets), seed=0) <= 0.1


def test_the_rule_is_seeded_and_scores_every_weight_as_best_does():
    y, nets, trees = _parts(500, 5, trees_noise=1.3)
    first, scores = choose_weight(y, nets, trees, rule="one_se", seed=7)
    assert choose_weight(y, nets, trees, rule="one_se", seed=7) == (first, scores)
    assert scores == choose_weight(y, nets, trees)[1]
    assert first in WEIGHTS


def test_an_unknown_rule_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="best, one_se"):
        SplitEnsemble(weight_rule="median")
    with pytest.raises(ConfigError, match="one_se"):
        choose_weight(np.array([0, 1]), np.zeros(2), np.zeros(2), rule="median")


def test_the_config_refuses_an_unknown_rule_naming_the_key():
    from vsplit.config.ensemble import ensemble_checks
    from vsplit.config.schema import EnsembleSection, ModelSection, NetworkSection, PartyConfig, PartySection

    net = NetworkSection(key="k", cert="c", peers={"shop": "s.pem"}, listen="0.0.0.0:1")
    config = PartyConfig(party=PartySection(name="bank", role="label"), network=net,
                         model=ModelSection(kind="ensemble"), ensemble=EnsembleSection(weight_rule="median"))
    assert any(e.startswith("ensemble.weight_rule: 'median'") and "one_se" in e for e in ensemble_checks(config))
