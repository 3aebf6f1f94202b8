"""Tasks: each loss is the torch functional it wraps, metrics agree with scikit-learn, bad labels are refused."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from sklearn import metrics as skm

from vsplit.errors import ConfigError, DataError
from vsplit.models.tasks import TASKS, Task, make_task


def test_every_registered_task_follows_the_task_protocol():
    assert TASKS.names() == ["binary", "multiclass", "regression"]
    for name in TASKS.names():
        task = make_task(name)
        assert isinstance(task, Task)
        assert task.name == name


def test_unknown_task_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="binary, multiclass, regression"):
        make_task("survival")


def test_a_users_own_task_object_is_used_as_it_is():
    own = make_task("regression")
    assert make_task(own) is own


def test_an_object_missing_task_methods_is_refused_by_name():
    class Half:
        name, primary, higher_is_better = "half", "auc", True

        def loss(self, outputs, targets): ...

    with pytest.raises(ConfigError, match="task Half lacks output_width, encode, encode_with, predict, metrics, score"):
        make_task(Half())


def test_binary_loss_is_bce_with_logits_on_squeezed_outputs():
    g = torch.Generator().manual_seed(0)
    logits, y = torch.randn(7, 1, generator=g), (torch.rand(7, generator=g) < 0.5).float()
    task = make_task("binary")
    expected = F.binary_cross_entropy_with_logits(logits.squeeze(1), y)
    assert torch.equal(task.loss(logits, y), expected)
    assert torch.equal(task.loss(logits.squeeze(1), y), expected)


def test_multiclass_loss_is_cross_entropy():
    g = torch.Generator().manual_seed(1)
    logits, y = torch.randn(9, 4, generator=g), torch.randint(0, 4, (9,), generator=g)
    assert torch.equal(make_task("multiclass").loss(logits, y), F.cross_entropy(logits, y))


def test_regression_loss_is_mean_squared_error():
    g = torch.Generator().manual_seed(2)
    out, y = torch.randn(6, 1, generator=g), torch.randn(6, generator=g)
    assert torch.equal(make_task("regression").loss(out, y), F.mse_loss(out.squeeze(1), y))


def test_output_widths_follow_the_number_of_classes():
    assert make_task("binary").output_width(None) == 1
    assert make_task("regression").output_width(None) == 1
    assert make_task("multiclass").output_width(5) == 5
    with pytest.raises(ConfigError, match="number of classes"):
        make_task("multiclass").output_width(None)


def test_predictions_are_probabilities_or_values_in_float64():
    logits = torch.tensor([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]])
    proba = make_task("multiclass").predict(logits)
    assert proba.dtype == np.float64 and proba.shape == (2, 3)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_allclose(make_task("binary").predict(torch.tensor([[0.0], [2.0]])), [0.5, 1 / (1 + math.exp(-2))])
    assert make_task("regression").predict(torch.tensor([[1.5], [-2.0]])).tolist() == [1.5, -2.0]


def test_multiclass_metrics_match_scikit_learn():
    rng = np.random.default_rng(3)
    y = np.array([0, 1, 2, 0, 1, 2, 2, 1])
    proba = rng.dirichlet(np.ones(3), size=len(y))
    m = make_task("multiclass").metrics(y, proba)
    assert m["accuracy"] == skm.accuracy_score(y, proba.argmax(1))
    assert m["macro_auc"] == pytest.approx(skm.roc_auc_score(y, proba, multi_class="ovr", average="macro"))
    assert m["log_loss"] == pytest.approx(skm.log_loss(y, proba))


def test_multiclass_auc_is_nan_when_a_class_is_absent_and_score_falls_back_to_accuracy():
    y = np.array([0, 1, 0, 1])
    proba = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.3, 0.6, 0.1], [0.1, 0.8, 0.1]])
    task = make_task("multiclass")
    m = task.metrics(y, proba)
    assert math.isnan(m["macro_auc"])
    assert task.score(y, proba) == m["accuracy"] == 0.75


def test_regression_metrics_match_scikit_learn_and_score_is_minus_rmse():
    y, p = np.array([1.0, 2.0, 4.0, 7.0]), np.array([1.5, 2.0, 3.0, 8.0])
    task = make_task("regression")
    m = task.metrics(y, p)
    assert m["rmse"] == pytest.approx(math.sqrt(skm.mean_squared_error(y, p)))
    assert m["mae"] == pytest.approx(skm.mean_absolute_error(y, p))
    assert m["r2"] == pytest.approx(skm.r2_score(y, p))
    assert task.score(y, p) == -m["rmse"]


def test_binary_score_falls_back_to_minus_log_loss_with_one_validation_class():
    task = make_task("binary")
    y, p = np.array([0, 0, 0]), np.array([0.1, 0.2, 0.3])
    assert task.score(y, p) == pytest.approx(-skm.log_loss(y, p, labels=[0, 1]))
    y2, p2 = np.array([0, 1, 0, 1]), np.array([0.1, 0.9, 0.6, 0.4])
    assert task.score(y2, p2) == skm.roc_auc_score(y2, p2)


def test_binary_encoding_detects_yes_and_reapplies_it_to_new_labels():
    task = make_task("binary")
    y, info = task.encode(pd.Series(["no", "yes", "no"]), name="y")
    assert y.dtype == torch.float32 and y.tolist() == [0.0, 1.0, 0.0]
    assert info == {"positive_label": "yes"}
    assert task.encode_with(pd.Series(["yes", "yes"], name="y"), info).tolist() == [1.0, 1.0]


def test_binary_encoding_asks_for_the_positive_label_when_it_cannot_guess():
    with pytest.raises(DataError, match=r"set data\.positive_label"):
        make_task("binary").encode(pd.Series(["good", "bad"]), name="risk")
    y, _ = make_task("binary").encode(pd.Series(["good", "bad"]), name="risk", positive_label="bad")
    assert y.tolist() == [0.0, 1.0]


def test_multiclass_encoding_sorts_classes_and_refuses_unseen_ones():
    task = make_task("multiclass")
    y, info = task.encode(pd.Series([7, 3, 5, 3]), name="digit")
    assert y.dtype == torch.int64 and y.tolist() == [2, 0, 1, 0]
    assert info == {"classes": [3, 5, 7]}
    assert task.encode_with(pd.Series([5, 7], name="digit"), info).tolist() == [1, 2]
    with pytest.raises(DataError, match=r"'digit' has classes \['9'\] that training never saw"):
        task.encode_with(pd.Series([5, 9], name="digit"), info)


@pytest.mark.parametrize(
    ("labels", "message"),
    [(pd.Series([1.0, None, 2.0]), "1 missing values"), (pd.Series(["a", "a"]), "single class")],
)
def test_multiclass_refuses_missing_labels_and_a_single_class(labels, message):
    with pytest.raises(DataError, match=message):
        make_task("multiclass").encode(labels, name="grade")


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (pd.Series([1.0, float("nan")]), "'amount' has 1 missing values"),
        (pd.Series(["1.0", "2.5"]), r"'amount' has dtype \w+, not numbers; convert it"),
        (pd.Series([1.0, float("inf")]), "'amount' has 1 infinite values"),
    ],
)
def test_regression_refuses_missing_non_numeric_and_infinite_labels(labels, message):
    with pytest.raises(DataError, match=message):
        make_task("regression").encode(labels, name="amount")


def test_regression_encodes_float32_values():
    y, info = make_task("regression").encode(pd.Series([1, 2, 5]), name="amount")
    assert y.dtype == torch.float32 and y.tolist() == [1.0, 2.0, 5.0] and info == {}


def test_moved_label_helpers_still_import_from_party():
    from vsplit.models import tasks
    from vsplit.party import binarise, detect_positive

    assert binarise is tasks.binarise and detect_positive is tasks.detect_positive
