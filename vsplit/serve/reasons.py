"""Reason codes on ``/v1/score``, asked per request (``"reasons": k``): the same computation as ``vsplit explain``.

Theory of operation. A request that asks for ``k`` reasons is scored as any other; then each applicant is explained
by the model that scored it:

- scored by the split: jointly with every partner, over the serving links, by the machines of ``vsplit explain``
  (:mod:`vsplit.serve.explain_link`; the bank coordinates, each partner answers with its daemon,
  :mod:`vsplit.serve.explain_partner`), with the bank's ``[explain]`` settings (``steps``, ``chunk``, ``method``);
- scored by boosted trees: at the bank alone, from the decision bits each partner answered for the score, by the
  path attribution of ``vsplit explain`` (:meth:`~vsplit.serve.boost_model.BoostBankModel.explain`): no message
  beyond the scoring round's, so a partner learns nothing of an explanation, and cached mode gives them too;
- scored by an ensemble: each network of its bag as a split network is (one exchange per network), its second part
  from the answers that scored it, weighed as ``vsplit explain`` weighs them (:func:`explain_ensemble`);
- scored by the bank-only fallback: by the bank's own model alone
  (:func:`~vsplit.app.fallback.explain_bank_only`: the logistic regression's exact attributions, or the network's
  integrated gradients), with nothing sent to any partner.

The attributions become reason codes as ``vsplit explain`` makes them (:func:`~vsplit.explain.reasons.reason_codes`
with ``explain.texts``, ``explain.decline_when`` and ``explain.threshold``), ``k`` at most; a partner is one reason,
``party:<name>``, named with its top columns only where its own ``explain.share_top_k`` allows. Unlike
``reasons.json``, which lists declined applicants only, every applicant asked about gets its reasons, and says whether
it is declined. Live mode only, but for boosted trees: in cached mode the partners never learn who is scored, and an
explanation exchange would tell them (:class:`ReasonsRefused`, 409).

Example:
    >>> parse_reasons({"id": "1", "features": {}, "reasons": 3})
    3
    >>> parse_reasons({"id": "1", "features": {}}) is None
    True
    >>> try:
    ...     parse_reasons({"reasons": 11})
    ... except BadRequest as exc:
    ...     print(exc.field, exc.status)
    reasons 422
"""

from __future__ import annotations

import queue
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vsplit.config import PartyConfig
from vsplit.errors import VsplitError
from vsplit.serve import messages as m
from vsplit.serve.explain_link import FROM_PARTNER, fit_baseline, unexplainable, unwrap, without_baseline, wrap
from vsplit.serve.links import PartnerDown
from vsplit.serve.requests import BadRequest
from vsplit.serve.scorer import BANK_ONLY, SPLIT, Row, Scored
from vsplit.serve.wire import serve_session

#: the run kinds whose reason codes come from the scoring round's own answers (no message more)
FROM_ANSWERS = ("boosting",)
#: the body field, and the most reasons one applicant may ask for
FIELD, MAX_REASONS = "reasons", 10


class ReasonsRefused(VsplitError):
    """Reason codes this service cannot give for a request: ``status`` (409, 422 or 502), ``code``, ``party``."""

    def __init__(self, message: str, *, status: int, code: str, party: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.party = status, code, party


def parse_reasons(body: Any) -> int | None:
    """The ``"reasons"`` of a request body (``None``: not asked), or :class:`BadRequest` naming the field."""
    if not isinstance(body, dict) or FIELD not in body:
        return None
    k = body[FIELD]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_REASONS:
        shown = "null" if k is None else repr(k) if not isinstance(k, str) else f"the string {k[:20]!r}"
        raise BadRequest(FIELD, f"expected an integer from 1 to {MAX_REASONS} (the reason codes wanted per "
                         f"applicant), got {shown}")
    return k


def without_reasons(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without its ``"reasons"`` field (the rest is checked as a plain scoring request)."""
    return {k: v for k, v in body.items() if k != FIELD}


def check_reasons(config: PartyConfig, version: Any) -> None:
    """Refuse a request for reasons before it is scored, when the service cannot give them: cached mode (409), or a
    model ``vsplit explain`` does not explain (422). Boosted trees are explained from the answers that scored the
    applicant, which tells a partner nothing: cached mode too."""
    kind = getattr(version, "kind", "")
    if kind in FROM_ANSWERS:
        return
    if config.serve.mode != "live":
        raise ReasonsRefused('reason codes need live mode (serve.mode = "live"): in cached mode the partners never '
                             "learn who is scored, and explaining a score would tell them; ask without \"reasons\", "
                             "or run vsplit explain on the applicants", status=409, code="reasons_need_live_mode")
    if kind == "scorecard":  # vsplit predict's round (scorecard_reasons)
        return
    node = getattr(version, "node", None)
    if kind == "ensemble":  # each network of its bag, explained in turn
        nets = version.networks.node
        why = next(filter(None, (without_baseline(nets.name, p) for p in nets.networks)), None)
        party = nets.party
    else:
        why = "its model is not a split network" if node is None else unexplainable(node)
        party = getattr(node, "party", None)
    if why is None and getattr(party, "task_width", 1) != 1:
        why = "it has one score per class (multiclass), which vsplit explain does not attribute"
    if why is not None:
        raise ReasonsRefused(f"reasons: model {version.run_id!r} has no reason codes: {why}", status=422,
                             code="reasons_unavailable")


def explain_timeout_s(config: PartyConfig) -> float:
    """How long an explanation waits for the partners: four scoring timeouts, at least 10 s (a partner prepares
    its serving table on its first explanation)."""
    return max(10.0, 4 * config.serve.timeout_ms / 1000)


def reasons_for(config: PartyConfig, versions: Mapping[str, Any], links: Mapping[str, Any], rows: Sequence[Row],
                scored: Sequence[Scored], k: int) -> list[dict[str, Any]]:
    """Per row, what its answer gains: ``reasons`` (at most ``k`` of ``{code, text, contribution}``, largest push
    towards a decline first) and ``declined``; ``{}`` for a row no model scored."""
    out: list[dict[str, Any]] = [{} for _ in rows]
    for run_id in dict.fromkeys(s.version for s in scored):
        version = versions[run_id]
        for model in (SPLIT, BANK_ONLY):
            picked = [i for i, s in enumerate(scored) if s.version == run_id and s.model == model]
            if not picked:
                continue
            features = [rows[i].features for i in picked]
            kind = getattr(version, "kind", "")
            if model == BANK_ONLY:
                explanation = version.explain_alone(features)
            elif kind == "scorecard":  # vsplit predict's round
                from vsplit.serve.scorecard_reasons import FROM_PARTNER as POINTS
                from vsplit.serve.scorecard_reasons import reason_records as card_records
                from vsplit.serve.scorecard_reasons import reasons_machine

                machine = reasons_machine(version, features, k)
                exchange(version, links, machine, m.id_keys([scored[i].id for i in picked], run_id=run_id),
                         allowed=POINTS, timeout_s=explain_timeout_s(config))
                for i, answer in zip(picked, card_records(config, version, machine.result), strict=True):
                    out[i] = answer
                continue
            elif kind in FROM_ANSWERS:  # the answers that scored the rows
                explanation = version.explain(features, _answers(version, scored, picked), positions(len(picked)))
            else:
                keys = m.id_keys([scored[i].id for i in picked], run_id=run_id)
                explanation = explain_ensemble(version, links, features, keys, _answers(version, scored, picked),
                                               timeout_s=explain_timeout_s(config)) if kind == "ensemble" \
                    else explain_split(version, links, features, keys, timeout_s=explain_timeout_s(config))
            for i, answer in zip(picked, reason_records(config, explanation, k), strict=True):
                out[i] = answer
    return out


def _answers(version: Any, scored: Sequence[Scored], picked: Sequence[int]) -> dict[str, np.ndarray]:
    """Each partner's answers of the rows ``picked``, as they scored them (in ``picked``'s order)."""
    return {p: np.stack([scored[i].answers[p] for i in picked]) for p in version.partners}


def reason_records(config: PartyConfig, explanation: Any, k: int) -> list[dict[str, Any]]:
    """``explanation``'s rows as ``{reasons, declined}``, the reason codes ``vsplit explain`` writes."""
    from vsplit.explain.reasons import reason_codes, reasons_json

    ex = config.explain
    table = reason_codes(explanation, n=k, texts=ex.texts, decline_when=ex.decline_when, threshold=ex.threshold,
                         declined_only=False)
    return [{"reasons": r["reasons"], "declined": r["declined"]} for r in reasons_json(table)]


def explain_split(version: Any, links: Mapping[str, Any], features: Sequence[Mapping[str, Any]], keys: np.ndarray,
                  *, timeout_s: float) -> Any:
    """The split's :class:`~vsplit.explain.explanation.Explanation` of the applicants ``features`` (bank columns;
    ``keys``: their keyed IDs), explained jointly with every partner of ``version`` over ``links``, as
    ``vsplit explain`` explains them. :class:`PartnerDown` if a partner is not connected or does not answer within
    ``timeout_s``; :class:`ReasonsRefused` (502) if one refuses."""
    node = version.node
    return explain_network(version, links, features, keys, party=node.party, topology=node.topology,
                           timeout_s=timeout_s)


def explain_network(version: Any, links: Mapping[str, Any], features: Sequence[Mapping[str, Any]], keys: np.ndarray,
                    *, party: Any, topology: Any, network: int = 0, timeout_s: float) -> Any:
    """One network's explanation of ``features`` (the bank's ``party`` of it, network ``network`` of an ensemble's
    bag) with every partner, with the bank's ``[explain]`` settings; rows named by position (:func:`positions`)."""
    from vsplit.explain.session import explain_machine, explanation_of
    from vsplit.serve.model import _frame

    ex = version.node.config.explain
    _, inputs = party.prepare(_frame(party, features, id_column=version.id_column))
    fit_baseline(party, topology)
    machine = explain_machine(party, topology, inputs, n_rows=len(features), steps=ex.steps, chunk=ex.chunk,
                              method=ex.method)
    exchange(version, links, machine, keys, allowed=FROM_PARTNER, timeout_s=timeout_s, network=network)
    return explanation_of(party.name, positions(len(features)), machine.result)


def explain_ensemble(version: Any, links: Mapping[str, Any], features: Sequence[Mapping[str, Any]],
                     keys: np.ndarray, answers: Mapping[str, np.ndarray], *, timeout_s: float) -> Any:
    """An ensemble's explanation of ``features``, as ``vsplit explain`` of the run makes it: each network of its bag
    explained jointly with every partner (one exchange a network), weighed ``w / networks``, and the second part's
    weighed ``1 - w``, explained at the bank from the second part of each partner's scoring ``answers`` (the trees'
    decision bits, or the scorecard's points): :func:`vsplit.ensemble.weighted_explanation`."""
    from vsplit.ensemble import weighted_explanation

    nets, weight = version.networks.node, version.node.weight
    share = weight / len(nets.networks)
    parts = [(share, explain_network(version, links, features, keys, party=party, topology=nets.topology,
                                     network=i, timeout_s=timeout_s)) for i, party in enumerate(nets.networks)]
    second = {p: a[:, version.networks.partners[p][1]:] for p, a in answers.items()}
    parts.append((1 - weight, version.trees.explain(features, second, positions(len(features)))))
    return weighted_explanation(parts)


def positions(n: int) -> list[str]:
    """Row names ``0 .. n-1``, zero-padded: their sorted order is the rows' (an ensemble's explanation sorts them)."""
    return [f"{i:0{len(str(n))}d}" for i in range(n)]


def exchange(version: Any, links: Mapping[str, Any], machine: Any, keys: np.ndarray, *,
             allowed: tuple[type, ...], timeout_s: float, network: int = 0) -> None:
    """Run the bank's sans-IO ``machine`` with every partner of ``version`` over the serving ``links``, the
    applicants' keyed IDs ``keys`` opening the exchange (:class:`~vsplit.serve.messages.ExplainOpen`) and each
    message wrapped in an :class:`~vsplit.serve.messages.ExplainStep`; a partner may send only the types
    ``allowed``. :class:`PartnerDown` if a partner is not connected or does not answer within ``timeout_s``;
    :class:`ReasonsRefused` (502) if one refuses."""
    node = version.node
    inbox: queue.Queue = queue.Queue()
    opened: dict[str, tuple[Any, int]] = {}
    sent: dict[str, int] = dict.fromkeys(version.partners, 0)
    taken: dict[str, int] = dict.fromkeys(version.partners, 0)
    sessions = {p: serve_session(node.name, p) for p in version.partners}

    def send(outgoing: list[Any]) -> None:
        for out in outgoing:
            link = opened[out.to][0]
            link.explain_step(wrap(opened[out.to][1], out.message, session=sessions[out.to], seq=sent[out.to]))
            sent[out.to] += 1

    try:
        for partner in version.partners:
            link = links.get(partner)
            if link is None or not link.alive:
                raise PartnerDown(partner, "not connected")
            opened[partner] = (link, link.explain(version.run_id, keys, inbox, network=network))
        send(machine.start())
        deadline = time.monotonic() + timeout_s
        while not machine.done:
            try:
                partner, step = inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                late = next((p for p in version.partners if machine.expects(p)), next(iter(version.partners)))
                raise PartnerDown(late, f"it did not answer the explanation within {timeout_s:g} s") from None
            if isinstance(step, PartnerDown):
                raise step
            if step.code:
                raise ReasonsRefused(f"partner {partner!r} refused to explain: {m.REFUSALS.get(step.code, step.code)}",
                                     status=502, code="explanation_refused", party=partner)
            inner = unwrap(step, session=sessions[partner], seq=taken[partner], allowed=allowed)
            taken[partner] += 1
            send(machine.receive(partner, inner))
    finally:
        for link, request in opened.values():
            link.end_explain(request)
            if not machine.done and link.alive:  # abandoned: the partner lets it go at once
                link.explain_step(m.ExplainStep(request=request, frame=np.zeros(0, np.uint8), code=m.BAD_REQUEST))
