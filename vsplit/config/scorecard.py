"""The ``[scorecard]`` section: checks, and the settings it gives (``[model] kind = "scorecard"``).

A scorecard runs in a vertical split with a binary label: PSI, the binning of ``[woe]`` and its selection, then the
logistic regression of :mod:`vsplit.scorecard` (docs/credit_scoring.md). Keys under 2048 bits are refused unless the
test-only environment variable of boosting (:data:`vsplit.config.boosting.SMALL_KEYS_ENV`) is ``"1"``.

Example:
    >>> from vsplit.config.schema import *
    >>> net = NetworkSection(key="k", cert="c", peers={"shop": "s.pem"}, listen="0.0.0.0:1")
    >>> config = PartyConfig(party=PartySection(name="bank", role="label"), network=net,
    ...                      model=ModelSection(kind="scorecard"), scorecard=ScorecardSection(pdo=0))
    >>> scorecard_checks(config, environ={})
    ['scorecard.pdo: 0 is out of range; use a positive number, e.g. 20']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vsplit.config.boosting import small_keys_allowed
from vsplit.config.schema import PartyConfig


def scorecard_checks(config: PartyConfig, *, environ: Mapping[str, str] | None = None) -> list[str]:
    """Problems of ``[scorecard]`` when ``model.kind`` is ``"scorecard"`` (or an ensemble's ``second``), each naming
    its key."""
    kind = config.model.kind
    if kind != "scorecard" and not (kind == "ensemble" and config.ensemble.second == "scorecard"):
        return []
    s = config.scorecard
    errors = []
    if config.topology.kind != "vertical":
        errors.append(f"model.kind: a scorecard runs in a vertical split; topology.kind is {config.topology.kind!r}")
    if config.topology.task != "binary":
        errors.append(f"topology.task: a scorecard predicts a binary label; got {config.topology.task!r}")
    if config.party.role == "compute":
        errors.append("party.role: a scorecard has a label party and feature parties, no compute party")
    ranges: list[tuple[str, Any, bool, str]] = [
        ("iterations", s.iterations, 1 <= s.iterations <= 10_000, "use 1..10000 (50 is usual)"),
        ("learning_rate", s.learning_rate, 0 < s.learning_rate <= 100, "use a positive step, e.g. 2"),
        ("l2", s.l2, 0 <= s.l2 <= 1e6, "use 0 (none) or a small penalty, e.g. 0.01"),
        ("base_score", s.base_score, math.isfinite(s.base_score), "use a number, e.g. 600"),
        ("base_odds", s.base_odds, math.isfinite(s.base_odds) and s.base_odds > 0, "use a positive number, e.g. 50"),
        ("pdo", s.pdo, math.isfinite(s.pdo) and s.pdo > 0, "use a positive number, e.g. 20"),
        ("reasons", s.reasons, 0 <= s.reasons <= 16, "use 0..16 (3 is usual)")]
    errors += [f"scorecard.{name}: {value!r} is out of range; {hint}" for name, value, ok, hint in ranges if not ok]
    if s.scheme not in ("ou", "paillier"):
        errors.append(f"scorecard.scheme: must be 'ou' or 'paillier'; got {s.scheme!r}")
    if s.key_bits < 2048 and not small_keys_allowed(environ):
        errors.append(f"scorecard.key_bits: {s.key_bits} bits; keys under 2048 bits are refused, use 2048 or 3072")
    elif not 512 <= s.key_bits <= 4096:
        errors.append(f"scorecard.key_bits: {s.key_bits} bits; use 2048 or 3072")
    if config.train.networks != 1:
        errors.append("train.networks: a bag of networks is for kind = \"network\"; set 1 with a scorecard")
    return errors


def scorecard_params(config: PartyConfig) -> Any:
    """The :class:`~vsplit.scorecard.ScorecardParams` and :class:`~vsplit.scorecard.Scaling` of ``[scorecard]``."""
    from vsplit.scorecard import Scaling, ScorecardParams

    s = config.scorecard
    return (ScorecardParams(iterations=s.iterations, learning_rate=s.learning_rate, l2=s.l2),
            Scaling(base_score=s.base_score, base_odds=s.base_odds, pdo=s.pdo))
