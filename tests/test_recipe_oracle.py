"""The new recipe keeps the oracle: with numeric embeddings (piecewise, periodic), with the ensemble top, with a
cosine learning-rate schedule and with a moving average of the parameters, split training over in-memory channels
ends at the parameters of the same network trained in one place."""

from __future__ import annotations

import pytest
import torch

from vsplit.estimator import SplitClassifier
from vsplit.models.ensemble import EnsembleTop
from vsplit.models.numeric import NumericEmbedding

RECIPES = {
    "piecewise": {"numeric_embedding": "piecewise"},
    "periodic": {"numeric_embedding": "periodic"},
    "ensemble": {"numeric_embedding": "piecewise", "members": 3},
    # benchmarks/quality.py's RECIPE: with dropout, each party's masks come from its own random stream in both runs
    "benchmark": {"numeric_embedding": "piecewise", "bottom_hidden": (128,), "top_hidden": (64,), "dropout": 0.1,
                  "optimizer": "adamw", "weight_decay": 1e-4, "monitor": "val_auc"},
    # each party scales its own learning rate per epoch and averages its own parameters (vsplit.models.schedule,
    # vsplit.models.averaging)
    "cosine_ema": {"numeric_embedding": "piecewise", "lr_schedule": "cosine", "ema": 0.9},
    # each party's initial weights and dropout stream from its own secret (vsplit.models.secret), which the
    # centralized run is handed too (issue 45)
    "own_secrets": {"numeric_embedding": "piecewise", "dropout": 0.1, "init_seeds": {"bank": 11, "partner": 22}},
}


def parameters(clf: SplitClassifier) -> dict[str, torch.Tensor]:
    modules = {"bank": clf.label_party_.model, "top": clf.label_party_.top,
               "partner": clf.feature_parties_["partner"].model}
    return {f"{seg}.{k}": v.detach().clone() for seg, m in modules.items() for k, v in m.state_dict().items()}


@pytest.mark.parametrize("recipe", RECIPES.values(), ids=RECIPES.keys())
def test_split_equals_centralized_with_the_new_recipe(views, one_thread, recipe):
    settings = dict(label_party="bank", label="y", candidates="network",
                    epochs=2, batch_size=64, patience=None, random_state=0, **recipe)
    split = SplitClassifier(mode="split", **settings).fit(views)
    pooled = SplitClassifier(mode="centralized", **settings).fit(views)
    assert isinstance(split.feature_parties_["partner"].model.numeric, NumericEmbedding)
    if recipe.get("members", 1) > 1:
        assert isinstance(split.label_party_.top, EnsembleTop) and len(split.label_party_.top.members) == 3
    got, want = parameters(split), parameters(pooled)
    untrained = parameters(SplitClassifier(mode="split", **{**settings, "epochs": 1}).fit(views))
    assert got.keys() == want.keys()
    assert any(not torch.allclose(got[k], untrained[k]) for k in got), "training moved no parameter"
    for key in want:
        torch.testing.assert_close(got[key], want[key], atol=1e-5, rtol=0, msg=key)


@pytest.mark.parametrize("change", [{"lr_schedule": "cosine"}, {"ema": 0.9}], ids=["cosine", "ema"])
def test_the_schedule_and_the_average_change_what_is_trained(views, one_thread, change):
    """Neither option is a no-op: the same fit without either ends at other parameters."""
    settings = dict(label_party="bank", label="y", candidates="network",
                    epochs=2, batch_size=64, patience=None, random_state=0,
                    mode="split", lr_schedule="constant", ema=0.0)
    plain = parameters(SplitClassifier(**settings).fit(views))
    changed = parameters(SplitClassifier(**{**settings, **change}).fit(views))
    assert any(not torch.allclose(plain[k], changed[k]) for k in plain)
