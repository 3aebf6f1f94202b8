"""The model-recipe keys of a party's config (``[model]`` numeric embeddings, ``members``,
``train.lr_schedule``, ``train.ema``): their checks, and how they map onto :class:`~vsplit.party.ModelSettings`.

``model.numeric_embedding = "auto"`` is piecewise-linear for a vertical, vanilla or U-shaped split
and ``"none"`` for a horizontal one: there the clients' bottoms are averaged, and each client's bin edges are its
own fitted state, which averaging would mix and send to the server. ``model.dropout`` and ``train.ema`` left out
are the default recipe's for the first three and 0 for a horizontal run (the horizontal schedules' figures were
measured without dropout, and its clients' weights are averaged already; a dropout set explicitly draws the same
masks in a run as processes as in one process).

Example:
    >>> from vsplit.config.schema import NetworkSection, PartyConfig, PartySection, TopologySection
    >>> net = NetworkSection(key="", cert="", peers={})
    >>> cfg = PartyConfig(party=PartySection(name="bank", role="label"), network=net)
    >>> recipe_settings(cfg)["numeric_embedding"], recipe_settings(cfg)["dropout"], recipe_settings(cfg)["ema"]
    ('auto', 0.1, 0.995)
    >>> from vsplit.config.schema import ModelSection
    >>> horizontal = PartyConfig(party=cfg.party, network=cfg.network, topology=TopologySection(kind="horizontal"),
    ...                          model=ModelSection(numeric_embedding="auto"))
    >>> [recipe_settings(horizontal)[k] for k in ("numeric_embedding", "dropout", "ema")]
    ['none', 0.0, 0.0]
"""

from __future__ import annotations

from typing import Any

from vsplit.config.schema import PartyConfig
from vsplit.models.averaging import check_ema
from vsplit.models.recipe import RECIPE
from vsplit.models.schedule import check_lr_schedule

#: what ``model.numeric_embedding`` accepts
NUMERIC_KINDS = ("auto", "none", "piecewise", "periodic")


def recipe_settings(config: PartyConfig) -> dict[str, Any]:
    """The :class:`~vsplit.party.ModelSettings` fields of issue 25's keys, from ``config``."""
    m = config.model
    horizontal = config.topology.kind == "horizontal"
    kind = m.numeric_embedding
    if kind == "auto" and horizontal:
        kind = "none"
    dropout = m.dropout if m.dropout is not None else 0.0 if horizontal else RECIPE["dropout"]
    ema = config.train.ema if config.train.ema is not None else 0.0 if horizontal else RECIPE["ema"]
    return {"numeric_embedding": kind, "numeric_width": m.numeric_width, "numeric_bins": m.numeric_bins,
            "members": m.members, "dropout": dropout, "ema": ema}


def recipe_checks(config: PartyConfig) -> list[str]:
    """Problems with the recipe keys of ``config``, each naming its key."""
    m, errors = config.model, []
    if m.numeric_embedding not in NUMERIC_KINDS:
        errors.append(f"model.numeric_embedding: must be one of {', '.join(NUMERIC_KINDS)}; got "
                      f"{m.numeric_embedding!r}")
    if m.numeric_embedding == "piecewise" and config.topology.kind == "horizontal":
        errors.append("model.numeric_embedding: piecewise bins are each client's own fitted state, and a horizontal "
                      "run averages the clients' bottoms; use \"periodic\" or \"none\" (\"auto\" picks none)")
    if m.numeric_embedding == "piecewise" and config.data.stream:
        errors.append("model.numeric_embedding: piecewise bins are fitted on the rows in memory, and data.stream "
                      "reads them by batches; use \"auto\" or \"none\" with stream = true")
    if problem := check_lr_schedule(config.train.lr_schedule, key="train.lr_schedule"):
        errors.append(problem)
    elif config.train.lr_schedule != "constant" and config.topology.kind == "horizontal":
        errors.append("train.lr_schedule: a horizontal run sets its learning rate per round; use [horizontal] "
                      "lr_schedule and leave train.lr_schedule at \"constant\"")
    if config.train.ema is not None and (problem := check_ema(config.train.ema, key="train.ema")):
        errors.append(problem)
    elif config.train.ema and config.topology.kind == "horizontal":
        errors.append("train.ema: a horizontal run averages its clients' weights already; set train.ema = 0")
    for key, value, low in (("model.numeric_width", m.numeric_width, 1), ("model.numeric_bins", m.numeric_bins, 2),
                            ("model.members", m.members, 1)):
        if value < low:
            errors.append(f"{key}: must be at least {low}, got {value}")
    return errors
