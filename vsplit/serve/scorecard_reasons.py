"""Reason codes of a served scorecard (``"reasons": k`` on ``/v1/score``, live mode): ``vsplit predict``'s round.

Theory of operation. A partner's scoring answer is one number, its points, and from a total the bank cannot tell
which of the partner's attributes cost the applicant most. So a request that asks for reasons runs, for the
applicants the scorecard scored, the scoring round of ``vsplit predict`` itself: the bank's
:class:`~vsplit.scorecard.predict.LabelPoints` and each partner's
:class:`~vsplit.scorecard.predict.PartnerPointsMachine`, their messages carried on the serving links as an
explanation's are (:func:`vsplit.serve.reasons.exchange` runs :func:`reasons_machine`). Each partner answers the
applicants' points and its ``k`` costliest attributes with the points each costs against the attribute's best bin;
it names them only if its own ``[scorecard] share_names`` is on (else ``#index``), as in ``points.csv``. So the
reasons equal batch prediction's. The partner learns which keyed IDs are explained, as in live scoring; its bins and
values stay with it.

A reason is ``{"code", "text", "contribution"}``: the code is the bank's attribute name, or ``party:<partner>:<name
or #index>``; the text is ``explain.texts`` of the code (of the partner's name for a partner's attribute, else
"information held by partner ..."); the contribution is the points the attribute costs. ``declined`` follows
``explain.decline_when`` and ``explain.threshold`` on the probability, as for networks.

Example:
    >>> reason_record(("shop", "#1", 12.5), bank="bank", texts={})["code"]
    'party:shop:#1'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vsplit.config import PartyConfig
from vsplit.scorecard.messages import PartnerPoints

#: what a partner may send in the round
FROM_PARTNER = (PartnerPoints,)


def reason_record(reason: tuple[str, str, float], *, bank: str, texts: Mapping[str, str]) -> dict[str, Any]:
    """One ``(party, attribute, points lost)`` of :class:`~vsplit.scorecard.predict.ScoredPoints` as served."""
    from vsplit.explain.reasons import PARTNER_TEXT

    party, attribute, lost = reason
    if party == bank:
        return {"code": attribute, "text": texts.get(attribute, attribute), "contribution": float(lost)}
    text = texts.get(party, PARTNER_TEXT.format(party=party))
    if not attribute.startswith("#"):
        text = f"{text} ({attribute})"
    return {"code": f"party:{party}:{attribute}", "text": text, "contribution": float(lost)}


def reasons_machine(version: Any, features: Sequence[Mapping[str, Any]], k: int) -> Any:
    """The bank's side of ``vsplit predict``'s scoring round for the applicants ``features`` (the bank's columns) of
    scorecard ``version``, asking every partner for ``k`` reasons; run it with
    :func:`vsplit.serve.reasons.exchange`, a partner sending only :data:`FROM_PARTNER`."""
    from vsplit.scorecard import LabelPoints

    return LabelPoints(version.table, own_codes=version.codes(features), base_points=version.base_points,
                       partners=list(version.partners), reasons=k, name=version.name)


def reason_records(config: PartyConfig, version: Any, result: Any) -> list[dict[str, Any]]:
    """Per applicant of the round's ``result`` (:class:`~vsplit.scorecard.predict.ScoredPoints`),
    ``{reasons, declined}``: its reasons, the costliest first, and whether it is declined."""
    from vsplit.scorecard import sigmoid

    proba = sigmoid(version.node.scaling.log_odds(result.score))
    ex = config.explain
    declined = proba >= ex.threshold if ex.decline_when == "high" else proba < ex.threshold
    return [{"reasons": [reason_record(r, bank=version.name, texts=ex.texts) for r in row], "declined": bool(d)}
            for row, d in zip(result.reasons, declined, strict=True)]
