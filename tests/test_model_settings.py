"""A party's model settings come from its config by name: every field has exactly one key of that name."""

from __future__ import annotations

import dataclasses

from vsplit.app.session import Schedule
from vsplit.config.schema import DataSection, ModelSection, NetworkSection, PartyConfig, PartySection, TrainSection
from vsplit.estimator import SplitClassifier
from vsplit.models.recipe import PLAIN, RECIPE
from vsplit.node.aligned import model_settings
from vsplit.party import ModelSettings


def test_every_model_setting_is_the_one_config_key_of_its_name() -> None:
    sections = (ModelSection, TrainSection, DataSection, NetworkSection)
    for f in dataclasses.fields(ModelSettings):
        owners = [s.__name__ for s in sections if f.name in {g.name for g in dataclasses.fields(s)}]
        assert len(owners) == 1, f"ModelSettings.{f.name} is a key of {owners or 'no section'}"


def test_config_values_reach_the_settings() -> None:
    config = PartyConfig(party=PartySection(name="bank", role="label"),
                         network=NetworkSection(key="", cert="", peers={}, compression="topk"),
                         model=ModelSection(embedding_width=5, dropout=0.25, members=3),
                         train=TrainSection(lr=0.05, weight_decay=1e-4, max_abs_gradient=7.0),
                         data=DataSection(scaling="standard", coerce_numbers=True))
    s = model_settings(config)
    assert (s.embedding_width, s.dropout, s.members, s.lr, s.weight_decay, s.max_abs_gradient) == (5, 0.25, 3, 0.05,
                                                                                                     1e-4, 7.0)
    assert (s.compression, s.scaling, s.coerce_numbers, s.numeric_embedding) == ("topk", "standard", True, "auto")


def test_the_default_recipe_is_the_default_of_the_estimator_the_settings_and_a_config() -> None:
    config = PartyConfig(party=PartySection(name="bank", role="label"),
                         network=NetworkSection(key="", cert="", peers={}))
    estimator, settings, schedule = SplitClassifier().get_params(), ModelSettings(), Schedule()
    resolved = model_settings(config)  # model.dropout left out: the recipe's in a vertical run
    for key, value in RECIPE.items():
        in_config = getattr(config.model if hasattr(config.model, key) else config.train, key)
        in_config = getattr(resolved, key) if in_config is None else in_config
        assert estimator[key] == in_config == value, key
        assert getattr(settings if hasattr(settings, key) else schedule, key) == value, key
    assert set(RECIPE) == set(PLAIN) and SplitClassifier(**PLAIN).get_params()["bottom_hidden"] == (64,)
