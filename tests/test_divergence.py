"""Divergence is an error (issue 29): a loss that is not finite stops training at the label party, naming the party
whose input went out of range, before anything of that step is used; the JSON a run writes stays strict."""

from __future__ import annotations

import json

import pytest
import torch
from _pilot_support import small
from torch import nn

from vsplit.datasets import preset
from vsplit.errors import DivergenceError
from vsplit.estimator import SplitClassifier
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.training.hooks import TrainingHooks
from vsplit.strict_json import dumps, loads_strict


@pytest.fixture(scope="module")
def data():
    return small(preset("secretflow_bank"), 400, 200)  # the first 400 training and 200 test customers


class SumTop(nn.Module):
    """A top model that adds up every embedding: 16 values of 3e38 overflow float32, as a real top can."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))

    def forward(self, embeddings):
        return self.w * sum(e.sum(dim=1) for e in embeddings.values())


def fit(data, *, training: bool):
    def huge(values, info):
        return values * 0 + 3e38 if info.training == training else values

    hooks = TrainingHooks(embedding_hooks={"partner": [huge]})
    SplitClassifier(label_party="bank", label="y", positive_label="yes", epochs=1, batch_size=32, random_state=0,
                    alignment="join", segments={"top": SumTop()}, hooks=hooks).fit(data.train)


def test_non_finite_training_loss_names_the_partner(data):
    with pytest.raises(DivergenceError, match=r"training loss is not finite .* at epoch 0, step 0") as caught:
        fit(data, training=True)
    assert "came from party 'partner' (values up to 3e+38" in str(caught.value)
    assert caught.value.code == AbortCode.DIVERGED


def test_non_finite_validation_loss_stops_before_the_epoch_is_kept(data):
    with pytest.raises(DivergenceError, match=r"validation loss is not finite .* at epoch 0: .*party 'partner'"):
        fit(data, training=False)


def test_report_values_that_are_not_finite_become_null():
    text = dumps({"history": [{"val_auc": float("nan"), "train_loss": float("inf")}], "n": 3})
    assert loads_strict(text) == {"history": [{"val_auc": None, "train_loss": None}], "n": 3}
    with pytest.raises(ValueError, match="not strict JSON"):
        loads_strict(json.dumps({"auc": float("nan")}))
