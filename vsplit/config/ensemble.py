"""The ``[ensemble]`` section (``[model] kind = "ensemble"``): checks, the weight grid, and each part's own config.

An ensemble between organizations trains split networks (the usual ``[model]`` and ``[train]`` keys, a bag of
``ensemble.networks``) and vertical boosted trees (``[boosting]``, whose checks apply too) or, with ``ensemble.second =
"scorecard"``, the vertical scorecard (``[woe]`` and ``[scorecard]``) over the same channels; the label party combines
them (:mod:`vsplit.node.ensemble`). :func:`part_config` gives each part the config its own node
(:class:`~vsplit.node.aligned.AlignedNode`, :class:`~vsplit.node.boost.BoostNode`,
:class:`~vsplit.node.scorecard.ScorecardNode`) reads.

Example:
    >>> from vsplit.config.schema import *
    >>> net = NetworkSection(key="k", cert="c", peers={"shop": "s.pem"}, listen="0.0.0.0:1")
    >>> config = PartyConfig(party=PartySection(name="bank", role="label"), network=net,
    ...                      model=ModelSection(kind="ensemble"), ensemble=EnsembleSection(weight_fraction=1.5))
    >>> ensemble_checks(config)
    ['ensemble.weight_fraction: 1.5 is out of range; use a share in (0, 1), e.g. 0.1']
    >>> part_config(config, "network").model.kind, weight_grid(config)[:3]
    ('network', (0.0, 0.05, 0.1))
"""

from __future__ import annotations

import dataclasses
import math

from vsplit.config.schema import PartyConfig
from vsplit.weight_rules import WEIGHT_RULES

#: ``ensemble.second``: the part the networks are combined with, and the model kind its node runs
SECONDS = {"trees": "boosting", "scorecard": "scorecard"}
#: the networks' candidate weights when ``ensemble.weights`` is empty (as :data:`vsplit.ensemble.WEIGHTS`)
DEFAULT_WEIGHTS = tuple(round(0.05 * k, 2) for k in range(21))


def ensemble_checks(config: PartyConfig) -> list[str]:
    """Problems of ``[ensemble]`` when ``model.kind`` is ``"ensemble"``, each naming its key (the trees' own keys are
    checked by :func:`vsplit.config.boosting.boosting_checks`)."""
    if config.model.kind != "ensemble":
        return []
    e, errors = config.ensemble, []
    if not 1 <= e.networks <= 50:
        errors.append(f"ensemble.networks: {e.networks!r} is out of range; use 1..50 (each network its own seed)")
    if not 0 < e.weight_fraction < 1:
        errors.append(f"ensemble.weight_fraction: {e.weight_fraction!r} is out of range; use a share in (0, 1), "
                      "e.g. 0.1")
    if any(not (math.isfinite(w) and 0 <= w <= 1) for w in e.weights):
        errors.append(f"ensemble.weights: {list(e.weights)}; each weight of the networks is in [0, 1] (the trees get "
                      "1 - w), e.g. [0.25, 0.5, 0.75]")
    if e.weight_rule not in WEIGHT_RULES:
        errors.append(f"ensemble.weight_rule: {e.weight_rule!r}; use \"best\" (the best AUC on the set-aside rows) "
                      "or \"one_se\" (the weight nearest 0.5 within one standard error of it)")
    if e.weight is not None and not (math.isfinite(e.weight) and 0 <= e.weight <= 1):
        errors.append(f"ensemble.weight: {e.weight!r}; a fixed weight of the networks is in [0, 1]")
    if e.second not in SECONDS:
        errors.append(f"ensemble.second: {e.second!r}; use \"trees\" (boosted trees, [boosting]) or \"scorecard\" "
                      "(the WOE scorecard, [woe] and [scorecard])")
    if config.train.networks != 1:
        errors.append("train.networks: an ensemble's bag is ensemble.networks; leave train.networks at 1")
    if config.data.stream:
        errors.append("data.stream: an ensemble reads its table whole (the trees need it); set data.stream = false")
    if config.privacy.detectors:
        errors.append("privacy.detectors: not run in an ensemble yet; train model.kind = \"network\" to use them")
    return errors


def weight_grid(config: PartyConfig) -> tuple[float, ...]:
    """The networks' candidate weights: ``ensemble.weights``, or :data:`DEFAULT_WEIGHTS`."""
    return tuple(float(w) for w in config.ensemble.weights) or DEFAULT_WEIGHTS


def second_kind(config: PartyConfig) -> str:
    """The model kind of the networks' partner: ``"boosting"`` or ``"scorecard"`` (``ensemble.second``)."""
    return SECONDS.get(config.ensemble.second, "boosting")


def part_config(config: PartyConfig, kind: str) -> PartyConfig:
    """``config`` as the node of one part reads it: ``kind`` ``"network"`` (a bag of ``ensemble.networks``),
    ``"boosting"`` or ``"scorecard"``."""
    networks = config.ensemble.networks if kind == "network" else 1
    return dataclasses.replace(config, model=dataclasses.replace(config.model, kind=kind),
                               train=dataclasses.replace(config.train, networks=networks))
