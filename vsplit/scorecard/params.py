"""The training settings of a scorecard, the fixed point of its residuals, and the optimiser's fixed schedule.

Theory of operation: every party runs the same deterministic full-batch optimiser on its own coefficients:
Nesterov's accelerated gradient descent on the mean logistic loss (plus ``l2 / 2 * |w|^2`` on the attribute
coefficients, never on the intercept), with a fixed step and the momentum schedule ``t / (t + 3)``, for exactly
``iterations`` steps from ``w = 0`` and the intercept at the training rows' log-odds. The schedule depends on nothing a
party holds, so each party updates its own coefficients alone and the split run takes the same steps as
:func:`vsplit.scorecard.fit_pooled` on the pooled WOE matrix. The residuals travel as integers
``round(d * residual_scale)`` and the WOE values as ``round(woe * woe_scale)``: those two roundings are the only
difference from the pooled run (about ``1 / residual_scale`` on a gradient).

Example:
    >>> ScorecardParams().iterations, momentum(0), momentum(3)
    (50, 0.0, 0.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vsplit.errors import ConfigError

#: the largest scale of a residual or a WOE value (2**30): the sums stay far inside an OU-2048 plaintext
MAX_SCALE = 1 << 30
#: the largest |WOE| a party may send into a gradient (beyond it a bin has nearly no events or non-events)
MAX_ABS_WOE = 20.0


def momentum(step: int) -> float:
    """Nesterov's momentum before step ``step`` (0-based): ``step / (step + 3)``."""
    return step / (step + 3)


@dataclass(frozen=True)
class ScorecardParams:
    """How a scorecard trains (the label party sends these to the partners, which take them).

    Args:
        iterations: full-batch steps (each costs one encryption of every training row's residual).
        learning_rate: the step on the mean logistic loss.
        l2: the L2 penalty on the attribute coefficients (0: none).
        residual_scale: the fixed point of a residual in ``[-1, 1]``.
        woe_scale: the fixed point of a WOE value.
    """

    iterations: int = 50
    learning_rate: float = 2.0
    l2: float = 0.0
    residual_scale: int = 1 << 24
    woe_scale: int = 1 << 24

    def __post_init__(self) -> None:
        checks = [("iterations", 1 <= self.iterations <= 10_000),
                  ("learning_rate", math.isfinite(self.learning_rate) and 0 < self.learning_rate <= 100),
                  ("l2", math.isfinite(self.l2) and 0 <= self.l2 <= 1e6),
                  ("residual_scale", isinstance(self.residual_scale, int) and 1 <= self.residual_scale <= MAX_SCALE),
                  ("woe_scale", isinstance(self.woe_scale, int) and 1 <= self.woe_scale <= MAX_SCALE)]
        for name, ok in checks:
            if not ok:
                raise ConfigError(f"scorecard.{name}: {getattr(self, name)!r} is out of range (see "
                                  "docs/credit_scoring.md)")
