"""SplitClassifier and SplitRegressor are scikit-learn estimators over a dict of per-party tables.

scikit-learn's own checks of the parameter protocol run as they are. The checks that fit on generated 2-D arrays do
not apply (the input is one table per party, the labels a column of the label party's table); what they check about
the protocol (fit returns self, changes no parameter, sets only attributes ending in ``_``; NotFittedError before
fit) is checked here on views. Then: clones train to identical predictions, ``score`` is accuracy / R² on the rows
every party knows, own modules need no widths (a dry forward pass finds them), and own modules are initialised from
``random_state``.
"""

from __future__ import annotations

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import estimator_checks as checks
from sklearn.utils.validation import check_is_fitted
from torch import nn

from vsplit import ConfigError, SplitClassifier, SplitRegressor, Topology
from vsplit.models.own import output_width
from vsplit.models.segments import MLP

#: scikit-learn's checks that need no fit on arrays: they exercise __init__, get_params, set_params, clone and tags
#: (the last five are in scikit-learn 1.6 and later)
PARAMETER_CHECKS = [
    "check_parameters_default_constructible",
    "check_no_attributes_set_in_init",
    "check_get_params_invariance",
    "check_set_params",
    "check_estimator_repr",
    "check_estimators_unfitted",
    "check_estimator_cloneable",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_mixin_order",
    "check_valid_tag_types",
    "check_estimator_tags_renamed",
]


@pytest.mark.parametrize("name", PARAMETER_CHECKS)
@pytest.mark.parametrize("estimator", [SplitClassifier, SplitRegressor], ids=lambda e: e.__name__)
def test_scikit_learn_parameter_checks_pass(estimator, name):
    check = getattr(checks, name, None)
    if check is None:
        pytest.skip(f"this scikit-learn has no {name}")
    check(estimator.__name__, estimator())


def test_the_estimators_are_a_classifier_and_a_regressor():
    assert is_classifier(SplitClassifier()) and is_regressor(SplitRegressor())


def numeric_views(n: int = 300, seed: int = 0, *, regression: bool = False) -> dict[str, pd.DataFrame]:
    """A bank (age, the label) and a partner (spend) who know 90 % of the same customers."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"C{i:05d}" for i in range(n)], dtype=object)
    age, spend = rng.normal(size=n), rng.normal(size=n)
    signal = age + 2 * spend
    y = signal + 0.1 * rng.normal(size=n) if regression else np.where(signal > 0, "yes", "no")
    keep = rng.random(n) < 0.9
    return {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": y}),
            "partner": pd.DataFrame({"customer_id": ids[keep], "spend": spend[keep]})}


FAST = {"epochs": 2, "batch_size": 64, "alignment": "join", "random_state": 0, "candidates": "network"}


@pytest.mark.parametrize("estimator", [SplitClassifier, SplitRegressor], ids=lambda e: e.__name__)
def test_fit_returns_self_changes_no_parameter_and_sets_only_trailing_underscore_attributes(estimator, one_thread):
    """check_estimators_fit_returns_self, check_estimators_overwrite_params, check_dont_overwrite_parameters and
    check_fit_check_is_fitted, on views."""
    views = numeric_views(regression=estimator is SplitRegressor)
    model = estimator(label_party="bank", **FAST)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)
    with pytest.raises(NotFittedError):
        model.predict(views)
    params, before = joblib.hash(model.get_params()), dict(vars(model))
    assert model.fit(views) is model
    assert joblib.hash(model.get_params()) == params
    added = set(vars(model)) - set(before)
    public = {a for a in added if not a.startswith("_")}
    assert public and all(a.endswith("_") for a in public), sorted(public)
    check_is_fitted(model)
    assert model.n_features_in_ == 2 and model.party_feature_names_in_ == {"bank": ["age"], "partner": ["spend"]}
    assert set(model.modules_) == {"bank", "partner", "top"}
    assert all(isinstance(m, nn.Module) for m in model.modules_.values())


def test_a_clone_trains_to_identical_predictions(one_thread):
    views = numeric_views()
    clf = SplitClassifier(label_party="bank", **FAST).fit(views)
    again = clone(clf)
    assert again.get_params().keys() == clf.get_params().keys() and not hasattr(again, "history_")
    with pytest.warns(UserWarning, match="not scored"):
        np.testing.assert_array_equal(again.fit(views).predict_proba(views), clf.predict_proba(views))
    assert clf.clone(lr=0.5).lr == 0.5 and clf.lr == 1e-3


def test_score_is_accuracy_or_r2_on_the_rows_every_party_knows(one_thread):
    views = numeric_views()
    clf = SplitClassifier(label_party="bank", **FAST).fit(views)
    assert clf.classes_.tolist() == ["no", "yes"]
    predicted = clf.predict(views)
    known = np.array([p is not None for p in predicted])
    assert 0 < (~known).sum() < len(known) // 4  # the customers the partner does not know are not scored
    accuracy = accuracy_score(views["bank"]["y"][known], predicted[known].astype(str))
    assert clf.score(views) == pytest.approx(accuracy) == pytest.approx(clf.evaluate(views)["accuracy"])

    views = numeric_views(regression=True)
    reg = SplitRegressor(label_party="bank", **dict(FAST, epochs=4, lr=1e-2)).fit(views)
    values = reg.predict(views)
    known = ~np.isnan(values)
    r2 = r2_score(views["bank"]["y"][known], values[known])
    assert reg.score(views) == pytest.approx(r2, rel=1e-5) and reg.score(views) == pytest.approx(
        reg.evaluate(views)["r2"], rel=1e-5)
    assert r2 > 0.5


def test_regression_belongs_to_the_regressor_and_classes_to_the_classifier():
    views = numeric_views(regression=True)
    with pytest.raises(ConfigError, match="use SplitRegressor"):
        SplitClassifier(label_party="bank", task="regression", **FAST).fit(views)
    with pytest.raises(ConfigError, match="use SplitClassifier"):
        SplitRegressor(label_party="bank", task="binary", **FAST).fit(views)


def test_multiclass_classes_are_the_sorted_labels(one_thread):
    views = numeric_views()
    views["bank"]["y"] = pd.cut(views["bank"]["age"], [-np.inf, -0.5, 0.5, np.inf], labels=["low", "mid", "high"])
    views["bank"]["y"] = views["bank"]["y"].astype(str)
    clf = SplitClassifier(label_party="bank", task="multiclass", **FAST).fit(views)
    assert clf.label_party_.task.name == "multiclass" and clf.classes_.tolist() == ["high", "low", "mid"]
    assert clf.predict_proba(views).shape == (300, 3)


class Head(nn.Module):
    """A client segment of one's own: a linear layer on the numeric columns (no width declared anywhere)."""

    def __init__(self, n_numeric: int, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n_numeric, width)
        self.drop = nn.Dropout(0.2)

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.linear(num)))


def u_shaped_view() -> dict[str, pd.DataFrame]:
    views = numeric_views()
    return {"bank": views["bank"].merge(views["partner"], on="customer_id")}


def test_u_shaped_own_modules_need_no_widths_and_equal_the_split_with_widths_given(one_thread):
    view = u_shaped_view()

    def fit(**topology):
        segments = {"head": Head(2, 8), "middle": MLP(8, hidden=(), out_dim=5, final_activation=True)}
        return SplitClassifier(label_party="bank", segments=segments, **FAST, **topology).fit(view)

    inferred = fit(topology="u_shaped")
    given = fit(topology=Topology.u_shaped(client="bank", server="server", widths=(8, 5)))
    assert [c.shapes for c in inferred.topology_.cuts] == [((8,),), ((5,),)]
    assert inferred.topology_.fingerprint() == given.topology_.fingerprint()
    np.testing.assert_array_equal(inferred.predict_proba(view), given.predict_proba(view))
    for name, module in inferred.modules_.items():
        for a, b in zip(module.parameters(), given.modules_[name].parameters(), strict=True):
            assert torch.equal(a, b), name


def test_vertical_own_bottoms_of_other_widths_train_split_and_alone(one_thread):
    views = numeric_views()
    clf = SplitClassifier(label_party="bank", models={"partner": Head(1, 7)}, **FAST).fit(views)
    assert clf.topology_.segment("partner").shapes == ((7,),) and clf.topology_.segment("bank").shapes == ((16,),)
    alone = clf.clone(mode="label_party_only", models={"bank": Head(1, 5)}).fit(views)
    assert alone.modules_["top"](torch.zeros(2, 5)).shape == (2,)


def test_a_dry_forward_pass_leaves_training_flags_and_the_global_generator_alone():
    head = Head(2, 8)
    head.linear.eval()  # a mixed state, restored as it was
    torch.manual_seed(5)
    state = torch.get_rng_state()
    assert output_width(head, (torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 2)), seed=0) == 8
    assert torch.equal(torch.get_rng_state(), state)
    assert head.training and head.drop.training and not head.linear.training
    with pytest.raises(ConfigError, match="segment 'head': a dry forward pass on inputs shaped"):
        output_width(head, (torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, 3)), seed=0, name="head")


def test_own_modules_are_initialised_from_random_state(one_thread):
    view = u_shaped_view()

    def fit(global_seed: int, **options):
        torch.manual_seed(global_seed)  # how the user's session happened to stand
        segments = {"head": Head(2, 8), "middle": MLP(8, hidden=(), out_dim=5, final_activation=True)}
        return SplitClassifier(label_party="bank", topology="u_shaped", segments=segments, **FAST,
                               **options).fit(view).predict_proba(view)

    np.testing.assert_array_equal(fit(1), fit(2))
    assert not np.array_equal(fit(1, reset_modules=False), fit(2, reset_modules=False))
