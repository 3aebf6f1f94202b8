"""Privacy guarantees: what a defense can promise as (epsilon, delta), and for what exactly.

Randomized response has a closed form: flipping a binary label with probability ``1 / (1 + e^ε)`` is ε-DP for that
label, with δ = 0. Gaussian noise on a clipped vector is accounted with Opacus' Rényi-DP analysis of the (sub-
sampled) Gaussian mechanism (``opacus.accountants.analysis.rdp``), the maintained implementation; install it with
``pip install 'vsplit[privacy]'``.

A :class:`Guarantee` says what it covers. Only ``formal=True`` ones hold for everything the other party sees;
the others account one kind of release (e.g. each row's own embeddings) and say in ``scope`` what they leave out.

Example:
    >>> round(randomized_response_epsilon(flip_probability=0.1), 3)
    2.197
    >>> g = gaussian_guarantee(noise_multiplier=1.0, steps=10, delta=1e-5, protects="x", scope="y")
    >>> round(g.epsilon, 1), g.delta
    (19.1, 1e-05)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from vsplit.errors import ConfigError

#: Rényi orders searched for the tightest epsilon: a fine grid near 1 (large epsilons) plus Opacus' usual range.
ORDERS = [1 + x / 100 for x in range(1, 100)] + [2 + x / 10 for x in range(100)] + [12.0, 16.0, 20.0, 32.0, 64.0, 128.0]


class AccountantMissing(ConfigError):
    """Opacus, which does the (ε, δ) accounting of Gaussian noise, is not installed."""


@dataclass(frozen=True)
class Guarantee:
    """A differential-privacy statement: ``epsilon``, ``delta``, what it ``protects`` and its ``scope``.

    ``formal`` is True only when the statement covers everything the other parties see (training messages and the
    trained model); otherwise ``scope`` names what is not covered.
    """

    epsilon: float
    delta: float
    protects: str
    scope: str
    formal: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def randomized_response_epsilon(*, flip_probability: float) -> float:
    """Epsilon of binary randomized response that flips each label with ``flip_probability`` (< 0.5)."""
    if not 0 <= flip_probability < 0.5:
        raise ConfigError(f"flip_probability must be in [0, 0.5), got {flip_probability}")
    return math.inf if flip_probability == 0 else math.log((1 - flip_probability) / flip_probability)


def gaussian_guarantee(
    *,
    noise_multiplier: float,
    steps: int,
    delta: float,
    protects: str,
    scope: str,
    sample_rate: float = 1.0,
    formal: bool = False,
) -> Guarantee:
    """(ε, δ) of ``steps`` compositions of the Gaussian mechanism with noise std ``noise_multiplier`` × sensitivity.

    ``sample_rate`` below 1 applies Poisson-subsampling amplification; leave it at 1 when each row is used once per
    epoch in shuffled batches (no amplification is justified then). Uses Opacus' RDP analysis.
    """
    try:
        from opacus.accountants.analysis import rdp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        hint = "privacy accounting needs Opacus; install it with: pip install 'vsplit[privacy]'"
        raise AccountantMissing(hint) from exc
    if noise_multiplier <= 0:
        return Guarantee(epsilon=math.inf, delta=delta, protects=protects, scope=scope, formal=formal)
    orders = ORDERS
    spent = rdp.compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=orders)
    epsilon, _ = rdp.get_privacy_spent(orders=orders, rdp=spent, delta=delta)
    return Guarantee(epsilon=float(epsilon), delta=delta, protects=protects, scope=scope, formal=formal)
