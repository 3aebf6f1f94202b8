"""The ``[woe]`` section: checks (``vsplit bin``, docs/credit_scoring.md), and the binning settings it gives.

Keys under 2048 bits are refused unless the test-only environment variable of boosting
(:data:`vsplit.config.boosting.SMALL_KEYS_ENV`) is ``"1"``.

Example:
    >>> from vsplit.config.schema import *
    >>> net = NetworkSection(key="k", cert="c", peers={"shop": "s.pem"}, listen="0.0.0.0:1")
    >>> config = PartyConfig(party=PartySection(name="bank", role="label"), network=net,
    ...                      woe=WoeSection(fine_bins=1, monotonic="up"))
    >>> for problem in woe_checks(config, environ={}):
    ...     print(problem)
    woe.fine_bins: 1 is out of range; use 2..255 (20 is usual)
    woe.monotonic: 'up'; use one of auto, ascending, descending, none
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vsplit.config.boosting import small_keys_allowed
from vsplit.config.schema import PartyConfig

TRENDS = ("auto", "ascending", "descending", "none")


def woe_checks(config: PartyConfig, *, environ: Mapping[str, str] | None = None) -> list[str]:
    """Problems of ``[woe]``, each naming its key."""
    w = config.woe
    errors = []
    ranges: list[tuple[str, Any, bool, str]] = [
        ("fine_bins", w.fine_bins, 2 <= w.fine_bins <= 255, "use 2..255 (20 is usual)"),
        ("min_bin_rows", w.min_bin_rows, w.min_bin_rows >= 1, "use 1 or more, e.g. 50"),
        ("min_bin_share", w.min_bin_share, 0 <= w.min_bin_share < 0.5, "use 0..0.5 (0.05 is usual)"),
        ("max_coarse_bins", w.max_coarse_bins, 1 <= w.max_coarse_bins <= 255, "use 1..255 (10 is usual)"),
        ("select_min_iv", w.select_min_iv, w.select_min_iv >= 0, "use 0 or more, e.g. 0.02 (weak and above)"),
        ("select_top_k", w.select_top_k, w.select_top_k >= 0, "use 0 (every attribute) or more"),
        ("workers", w.workers, 1 <= w.workers <= 256, "use 1 or the cores to use"),
        ("validation_share", w.validation_share, 0 < w.validation_share <= 0.8, "use 0..0.8 (0.3 is usual)")]
    errors += [f"woe.{name}: {value!r} is out of range; {hint}" for name, value, ok, hint in ranges if not ok]
    if w.monotonic not in TRENDS:
        errors.append(f"woe.monotonic: {w.monotonic!r}; use one of {', '.join(TRENDS)}")
    if w.scheme not in ("ou", "paillier"):
        errors.append(f"woe.scheme: must be 'ou' or 'paillier'; got {w.scheme!r}")
    if w.key_bits < 2048 and not small_keys_allowed(environ):
        errors.append(f"woe.key_bits: {w.key_bits} bits; keys under 2048 bits are refused, use 2048 or 3072")
    elif not 512 <= w.key_bits <= 4096:
        errors.append(f"woe.key_bits: {w.key_bits} bits; use 2048 or 3072")
    return errors


def classing_params(config: PartyConfig) -> Any:
    """The :class:`~vsplit.woe.classing.ClassingParams` of ``config``'s ``[woe]``."""
    from vsplit.woe.classing import ClassingParams

    w = config.woe
    return ClassingParams(min_bin_share=w.min_bin_share, monotonic=w.monotonic, max_bins=w.max_coarse_bins)
