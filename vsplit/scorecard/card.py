"""The label party's model-card section of a scorecard: its own points table, the base points, and for each partner
what that partner chose to show (its number of attributes; its names and points table only if it shares them).

Example:
    >>> from vsplit.scorecard.points import PointsTable, Scaling
    >>> own = PointsTable(names=("age",), labels=(("young", "old"),), points=((-5.0, 7.5),))
    >>> text = card_markdown(own, base_points=512.0, scaling=Scaling(),
    ...                      cards={"shop": {"attributes": 2, "names": None, "points": None}})
    >>> "| age | old | 7.5 |" in text, "shop: 2 attributes, names not shared" in text
    (True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vsplit.scorecard.points import PointsTable, Scaling


def card_markdown(own: PointsTable, *, base_points: float, scaling: Scaling, cards: Mapping[str, Mapping[str, Any]],
                  name: str = "bank") -> str:
    """The section as Markdown."""
    lines = ["## Scorecard", "",
             f"Score = base points + each attribute's points; {scaling.base_score:g} points at odds of "
             f"{scaling.base_odds:g} non-events to one event, {scaling.pdo:g} points to double the odds. "
             f"Base points (the intercept, kept at {name}): {base_points:.1f}.", "",
             f"### {name} (label party)", "", "| attribute | bin | points |", "| --- | --- | ---: |",
             *(f"| {a} | {b} | {p:.1f} |" for a, b, p in own.rows()), ""]
    for partner, card in cards.items():
        names = card.get("names")
        shared = "names shared" if names else "names not shared"
        lines += [f"### {partner}", "", f"{partner}: {card['attributes']} attributes, {shared}"
                  + (f" ({', '.join(names)})" if names else "") + ".", ""]
        if card.get("points"):
            lines += ["| attribute | bin | points |", "| --- | --- | ---: |",
                      *(f"| {a} | {b} | {p:.1f} |" for a, b, p in card["points"]), ""]
        else:
            lines += [f"{partner} keeps its points table; its points come as one number per row.", ""]
    return "\n".join(lines)
