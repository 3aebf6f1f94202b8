"""The ``[boosting]`` section: checks, the :class:`~vsplit.boosting.BoostParams` it gives, the test-only key flag.

``[model] kind = "boosting"`` trains vertical gradient-boosted trees instead of split networks (docs/boosting.md).
It runs in a vertical split, binary task, and keys under 2048 bits are refused unless the test-only environment
variable :data:`SMALL_KEYS_ENV` is ``"1"`` (the homomorphic layer then warns at every key it makes or accepts).

Example:
    >>> from vsplit.config.schema import *
    >>> net = NetworkSection(key="k", cert="c", peers={"shop": "s.pem"}, listen="0.0.0.0:1")
    >>> config = PartyConfig(party=PartySection(name="bank", role="label"), network=net,
    ...                      model=ModelSection(kind="boosting"), boosting=BoostingSection(key_bits=1024))
    >>> boosting_checks(config, environ={})[0][:60]
    'boosting.key_bits: 1024 bits; keys under 2048 bits are refus'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from vsplit.config.schema import PartyConfig

#: set to "1" only by tests: lets ``boosting.key_bits`` go down to 1024 (OU) / 512 (Paillier), with a warning
SMALL_KEYS_ENV = "VSPLIT_INSECURE_SMALL_HE_KEYS_FOR_TESTS"
MODEL_KINDS = ("network", "boosting", "scorecard", "ensemble")


def small_keys_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the test-only flag is set (never in a real run)."""
    return (os.environ if environ is None else environ).get(SMALL_KEYS_ENV) == "1"


def boosting_checks(config: PartyConfig, *, environ: Mapping[str, str] | None = None) -> list[str]:
    """Problems of ``[model] kind`` and ``[boosting]``, each naming its key."""
    kind, b = config.model.kind, config.boosting
    if kind not in MODEL_KINDS:
        return [f"model.kind: must be one of {', '.join(MODEL_KINDS)}; got {kind!r}"]
    if kind not in ("boosting", "ensemble") or (kind == "ensemble" and config.ensemble.second != "trees"):
        return []  # an ensemble's trees are [boosting]'s
    errors = []
    if config.topology.kind != "vertical":
        errors.append(f"model.kind: boosting runs in a vertical split; topology.kind is {config.topology.kind!r}")
    if config.topology.task != "binary":
        errors.append(f"topology.task: boosting trains a binary classifier for now; got {config.topology.task!r}")
    if config.party.role == "compute":
        errors.append("party.role: boosting has a label party and feature parties, no compute party")
    ranges: list[tuple[str, Any, bool]] = [
        ("trees", b.trees, 1 <= b.trees <= 10_000), ("max_depth", b.max_depth, 1 <= b.max_depth <= 16),
        ("learning_rate", b.learning_rate, 0 < b.learning_rate <= 1), ("reg_lambda", b.reg_lambda, b.reg_lambda >= 0),
        ("gamma", b.gamma, b.gamma >= 0), ("min_child_weight", b.min_child_weight, b.min_child_weight >= 0),
        ("max_bins", b.max_bins, 2 <= b.max_bins <= 255), ("min_node_rows", b.min_node_rows, b.min_node_rows >= 1),
        ("min_category_rows", b.min_category_rows, b.min_category_rows >= 1)]
    errors += [f"boosting.{name}: {value!r} is out of range (see docs/boosting.md)" for name, value, ok in ranges
               if not ok]
    if not (0 <= b.goss_top_rate < 1 and 0 <= b.goss_other_rate <= 1 - b.goss_top_rate
            and (b.goss_top_rate > 0) == (b.goss_other_rate > 0)):
        errors.append(f"boosting.goss_top_rate, goss_other_rate: {b.goss_top_rate!r} and {b.goss_other_rate!r}; both 0 "
                      "(every row) or both above 0 with their sum at most 1, e.g. 0.2 and 0.1")
    if b.scheme not in ("ou", "paillier"):
        errors.append(f"boosting.scheme: must be 'ou' or 'paillier'; got {b.scheme!r}")
    if b.key_bits < 2048 and not small_keys_allowed(environ):
        errors.append(f"boosting.key_bits: {b.key_bits} bits; keys under 2048 bits are refused, use 2048 or 3072")
    elif not 512 <= b.key_bits <= 4096:
        errors.append(f"boosting.key_bits: {b.key_bits} bits; use 2048 or 3072")
    if b.early_stopping_rounds < 0:
        errors.append(f"boosting.early_stopping_rounds: {b.early_stopping_rounds}; 0 (every tree) or the trees "
                      "without a better held-out loss after which training stops, e.g. 5")
    elif b.early_stopping_rounds and config.party.role == "label" and not config.train.validation_fraction > 0:
        errors.append("boosting.early_stopping_rounds: needs held-out rows; set train.validation_fraction, e.g. 0.1")
    if config.train.networks != 1 and kind == "boosting":
        errors.append("train.networks: a bag of networks is for kind = \"network\"; set 1 with boosting")
    return errors


def boost_params(config: PartyConfig) -> Any:
    """The :class:`~vsplit.boosting.BoostParams` of ``config``'s ``[boosting]``."""
    from vsplit.boosting import BoostParams

    b = config.boosting
    return BoostParams(trees=b.trees, max_depth=b.max_depth, learning_rate=b.learning_rate, reg_lambda=b.reg_lambda,
                       gamma=b.gamma, min_child_weight=b.min_child_weight, goss_top_rate=b.goss_top_rate,
                       goss_other_rate=b.goss_other_rate, seed=config.train.seed, order_categories=b.order_categories,
                       min_category_rows=b.min_category_rows)
