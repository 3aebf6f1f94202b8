"""The default recipe: the one place the defaults of a split network's bottoms, top and training are written.

:class:`~vsplit.estimator.SplitClassifier` (and ``SplitRegressor``), :class:`~vsplit.party.ModelSettings`, a party
config's ``[model]`` and ``[train]`` tables and ``benchmarks/quality.py`` all read :data:`RECIPE`, so changing the
recipe is one edit here. It is the recipe ``benchmarks/recipe_search.py`` chose on validation rows of the training
rows (docs/models.md, "The default recipe"): piecewise-linear numeric embeddings, a bottom of 128 and a top of 64 with
dropout 0.1, AdamW at 1e-3 with weight decay 1e-4, a moving average of each party's parameters (decay 0.995 per
step; validation scores, and the run keeps, the averaged weights), up to 40 epochs, keeping the epoch of the best
validation AUC and stopping after 5 epochs without a better one.

:data:`PLAIN` is the recipe before it (vsplit 0.x up to issue 25): no numeric embedding, a bottom of 64, a top of 32,
Adam, at most 20 epochs with early stopping on the validation loss (patience 3). Pass it to get that network back,
e.g. ``SplitClassifier(**PLAIN)``.

Two values are resolved where the run is known: ``numeric_embedding = "auto"`` is piecewise-linear, except for a
horizontal run (its clients' bottoms are averaged, and each client's bins are its own fitted state) and for a party
that streams its table from Parquet (the bins need the rows in memory), where it is ``"none"``; ``monitor = "auto"``
is the validation AUC for a binary task (what the search chose) and the validation loss for the others (the search
measured binary tasks only; :func:`resolve_monitor`). A party config that leaves ``model.dropout`` or
``train.ema`` out gets 0 in a horizontal run (:func:`vsplit.config.recipe.recipe_settings`: the horizontal figures
were measured without dropout, and its clients' weights are averaged already).

In a bag of networks (:class:`vsplit.bagging.SplitBag`, ``train.networks``), ``numeric_embedding = "auto"`` takes
:data:`BAG_NUMERIC` in turn: piecewise-linear for networks 1, 3, 5 ..., periodic for networks 2, 4 ...
(:func:`network_numeric`). Two kinds of embedding make the networks' errors less alike than seeds alone do: on
validation rows of the four presets a bag of 5 alternating them beat 5 piecewise networks by 0.0011 mean AUC
(docs/models.md, "A bag of two embeddings"). One network alone is unchanged.

Example:
    >>> RECIPE["bottom_hidden"], RECIPE["top_hidden"], RECIPE["optimizer"]
    ((128,), (64,), 'adamw')
    >>> resolve_monitor("auto", "binary"), resolve_monitor("auto", "regression"), resolve_monitor("val_loss", "binary")
    ('val_auc', 'val_loss', 'val_loss')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

#: the defaults of a party's model (``[model]`` in a party config)
MODEL: MappingProxyType[str, Any] = MappingProxyType({
    "numeric_embedding": "auto",
    "bottom_hidden": (128,),
    "top_hidden": (64,),
    "dropout": 0.1,
})
#: the defaults of training (``[train]`` in a party config; the optimizer is every party's own)
TRAIN: MappingProxyType[str, Any] = MappingProxyType({
    "optimizer": "adamw",
    "lr": 1e-3,
    "weight_decay": 1e-4,
    "lr_schedule": "constant",
    "ema": 0.995,
    "epochs": 40,
    "patience": 5,
    "monitor": "auto",
    "min_steps": 32,
})
#: the batch a run starts from when ``batch_size`` is left out (``None``): halved on a small table until an epoch has
#: ``min_steps`` optimizer steps (:func:`vsplit.app.session.fitted_batch`); a batch size given is used as given
BATCH_SIZE = 256
#: the whole default recipe, as :class:`~vsplit.estimator.SplitClassifier` parameters
RECIPE: MappingProxyType[str, Any] = MappingProxyType({**MODEL, **TRAIN})
#: the plain network that was the default before :data:`RECIPE` (the same keys)
PLAIN: MappingProxyType[str, Any] = MappingProxyType({
    "numeric_embedding": "none", "bottom_hidden": (64,), "top_hidden": (32,), "dropout": 0.0,
    "optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "lr_schedule": "constant", "ema": 0.0,
    "epochs": 20, "patience": 3, "monitor": "val_loss", "min_steps": 0,
})
#: the settings that shape a party's default modules: a saved model is rebuilt with the values it was trained with
ARCHITECTURE = ("embedding_width", "numeric_embedding", "numeric_width", "numeric_bins", "members", "bottom_hidden",
                "top_hidden", "merge", "dropout")


def config_overrides(values: Mapping[str, Any], *, skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``values`` (keys of :data:`MODEL` and :data:`TRAIN`) as ``--set`` overrides of a party config, but ``skip``.

    >>> config_overrides(PLAIN, skip=("epochs", "patience", "monitor"))[:2]
    ('model.numeric_embedding="none"', 'model.bottom_hidden=[64]')
    """
    import json

    return tuple(f"{'model' if key in MODEL else 'train'}.{key}={json.dumps(list(v) if isinstance(v, tuple) else v)}"
                 for key, v in values.items() if key not in skip)


#: what ``numeric_embedding = "auto"`` gives the networks of a bag, in turn (network ``i`` takes entry ``i % 2``)
BAG_NUMERIC = ("piecewise", "periodic")


def network_numeric(kind: str, network: int, *, streamed: bool = False) -> str:
    """The numeric embedding of network ``network`` (counted from 0) of a bag whose parties ask for ``kind``.

    ``kind`` itself, except ``"auto"`` on rows held in memory, which takes :data:`BAG_NUMERIC` in turn (a table
    streamed from Parquet keeps ``"auto"``, which the party resolves to ``"none"``).

    >>> [network_numeric("auto", i) for i in range(3)], network_numeric("none", 1)
    (['piecewise', 'periodic', 'piecewise'], 'none')
    >>> network_numeric("auto", 1, streamed=True)
    'auto'
    """
    if kind != "auto" or streamed:
        return kind
    return BAG_NUMERIC[network % len(BAG_NUMERIC)]


def resolve_monitor(monitor: str, task: str) -> str:
    """What early stopping watches: ``monitor`` itself, or for ``"auto"`` ``"val_auc"`` when ``task`` is
    ``"binary"`` and ``"val_loss"`` otherwise."""
    if monitor != "auto":
        return monitor
    return "val_auc" if task == "binary" else "val_loss"
