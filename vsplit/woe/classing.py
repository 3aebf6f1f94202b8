"""Coarse classing and weight of evidence from per-bin counts alone (the label party's side; no value, no edge).

Weight of evidence follows optbinning's sign: ``WOE = ln((non-events_i / non-events) / (events_i / events))``, so a
bin of lower event rate than the whole has a positive WOE; a bin without events or without non-events gets WOE 0.
``IV = sum_i (non-events_i / non-events - events_i / events) * WOE_i``.

Coarse classing merges adjacent fine value bins (for a categorical attribute: adjacent in the order of event rate),
never the missing bin (the last): first every bin under ``min_bin_share`` of the rows, then every bin without events
or without non-events, each into the neighbour of closer event rate; then, for a numeric attribute, the pairs that
break a monotonic event-rate trend (``monotonic``: ``"ascending"``, ``"descending"``, ``"auto"``: the direction of
higher IV, or ``"none"``); last, while there are more than ``max_bins`` value bins, the adjacent pair whose merge
loses least IV.

Example:
    >>> import numpy as np
    >>> events, nonevents = np.array([10, 12, 30, 40, 5]), np.array([90, 88, 70, 60, 0])
    >>> coarse = coarse_classes(events, nonevents, kind="numeric", params=ClassingParams(min_bin_share=0.3))
    >>> coarse.tolist()
    [0, 0, 1, 1, 2]
    >>> np.round(woe_iv(*merge_counts(events, nonevents, coarse))[0], 3).tolist()
    [0.935, -0.536, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.errors import ConfigError

TRENDS = ("auto", "ascending", "descending", "none")


@dataclass(frozen=True)
class ClassingParams:
    """How fine bins become coarse ones (``[woe]`` in a party config: ``min_bin_share``, ``monotonic``,
    ``max_coarse_bins``)."""

    min_bin_share: float = 0.05
    monotonic: str = "auto"
    max_bins: int = 10

    def __post_init__(self) -> None:
        if not 0 <= self.min_bin_share < 0.5:
            raise ConfigError(f"woe.min_bin_share = {self.min_bin_share}; use 0..0.5 (0.05 is usual)")
        if self.monotonic not in TRENDS:
            raise ConfigError(f"woe.monotonic = {self.monotonic!r}; use one of {', '.join(TRENDS)}")
        if self.max_bins < 1:
            raise ConfigError(f"woe.max_coarse_bins = {self.max_bins}; use 1 or more")


def woe_iv(events: np.ndarray, nonevents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """WOE and IV of each bin from its event and non-event counts (optbinning's sign; 0 where a count is 0)."""
    events, nonevents = np.asarray(events, dtype=np.float64), np.asarray(nonevents, dtype=np.float64)
    p_event = events / max(events.sum(), 1.0)
    p_nonevent = nonevents / max(nonevents.sum(), 1.0)
    both = (events > 0) & (nonevents > 0)
    woe = np.zeros(len(events))
    woe[both] = np.log(p_nonevent[both] / p_event[both])
    return woe, (p_nonevent - p_event) * woe


def merge_counts(events: np.ndarray, nonevents: np.ndarray, coarse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts per coarse bin from counts per fine bin and each fine bin's coarse index."""
    n = int(np.max(coarse)) + 1
    return (np.bincount(coarse, weights=events, minlength=n).astype(np.int64),
            np.bincount(coarse, weights=nonevents, minlength=n).astype(np.int64))


def coarse_classes(events: np.ndarray, nonevents: np.ndarray, *, kind: str, params: ClassingParams) -> np.ndarray:
    """Each fine bin's coarse index (value bins ``0..k-1`` in order, the missing bin, last, alone as ``k``)."""
    events, nonevents = np.asarray(events, dtype=np.int64), np.asarray(nonevents, dtype=np.int64)
    values = len(events) - 1
    order = list(range(values))
    if kind != "numeric":  # categories: adjacent in the order of event rate
        rate = events[:values] / np.maximum(events[:values] + nonevents[:values], 1)
        order = sorted(order, key=lambda b: (rate[b], b))
    groups = [[b] for b in order if events[b] + nonevents[b] > 0] or [[order[0]]] if order else []
    for b in order:  # an empty value bin joins the group of its neighbour (it changes no count)
        if not any(b in g for g in groups):
            _nearest(groups, b).append(b)
    total = int(events.sum() + nonevents.sum())
    groups = _merge_while(groups, events, nonevents, lambda e, n: e + n < params.min_bin_share * total)
    groups = _merge_while(groups, events, nonevents, lambda e, n: e == 0 or n == 0)
    if kind == "numeric" and params.monotonic != "none":
        trends = ("ascending", "descending") if params.monotonic == "auto" else (params.monotonic,)
        options = [_monotonic(groups, events, nonevents, t) for t in trends]
        groups = max(options, key=lambda g: (_iv(g, events, nonevents), -options.index(g)))
    while len(groups) > params.max_bins:
        losses = [_iv(groups, events, nonevents) - _iv(_joined(groups, i), events, nonevents)
                  for i in range(len(groups) - 1)]
        groups = _joined(groups, int(np.argmin(losses)))
    coarse = np.empty(len(events), dtype=np.int64)
    for index, group in enumerate(groups):
        coarse[group] = index
    coarse[values] = len(groups)
    return coarse


def _nearest(groups: list[list[int]], b: int) -> list[int]:
    return min(groups, key=lambda g: min(abs(x - b) for x in g))


def _sums(group: list[int], events: np.ndarray, nonevents: np.ndarray) -> tuple[int, int]:
    return int(events[group].sum()), int(nonevents[group].sum())


def _rate(group: list[int], events: np.ndarray, nonevents: np.ndarray) -> float:
    e, n = _sums(group, events, nonevents)
    return e / max(e + n, 1)


def _joined(groups: list[list[int]], i: int) -> list[list[int]]:
    return [*groups[:i], groups[i] + groups[i + 1], *groups[i + 2 :]]


def _merge_while(groups: list[list[int]], events: np.ndarray, nonevents: np.ndarray, bad: object) -> list[list[int]]:
    """Merge the smallest group for which ``bad(events, non-events)`` holds into its neighbour of closer rate."""
    while len(groups) > 1:
        sizes = [_sums(g, events, nonevents) for g in groups]
        flagged = [i for i, (e, n) in enumerate(sizes) if bad(e, n)]  # type: ignore[operator]
        if not flagged:
            break
        i = min(flagged, key=lambda k: (sum(sizes[k]), k))
        rate = _rate(groups[i], events, nonevents)
        near = [j for j in (i - 1, i + 1) if 0 <= j < len(groups)]
        j = min(near, key=lambda k: (abs(_rate(groups[k], events, nonevents) - rate), k))
        groups = _joined(groups, min(i, j))
    return groups


def _monotonic(groups: list[list[int]], events: np.ndarray, nonevents: np.ndarray, trend: str) -> list[list[int]]:
    """Merge adjacent groups until the event rate rises (``ascending``) or falls along the bins."""
    sign = 1.0 if trend == "ascending" else -1.0
    while True:
        rates = [sign * _rate(g, events, nonevents) for g in groups]
        broken = [i for i in range(len(groups) - 1) if rates[i + 1] < rates[i]]
        if not broken:
            return groups
        groups = _joined(groups, broken[0])


def _iv(groups: list[list[int]], events: np.ndarray, nonevents: np.ndarray) -> float:
    sums = np.array([_sums(g, events, nonevents) for g in groups], dtype=np.float64).reshape(-1, 2)
    return float(woe_iv(sums[:, 0], sums[:, 1])[1].sum())
