"""The value report's last question: how much better is a scorecard with the partners' attributes than the bank's alone?

Theory of operation. After the binning, the label party holds out a seeded share of the aligned rows (validation,
:func:`validation_rows`; only it knows which). It fits a bank-only scorecard on its own selected attributes' WOE of
the other rows (:func:`~vsplit.scorecard.fit_pooled`, in the clear: nothing crosses), and a joint one with every
partner by the machines of the vertical scorecard (:class:`~vsplit.scorecard.LabelScorecard` masked to the fit rows,
each partner's :class:`~vsplit.scorecard.PartnerScorecard` on its own selected attributes of every aligned row: it
cannot tell which rows are held out, their residuals are encrypted zeros). Then one scoring round (each partner's
points of every aligned row, :class:`~vsplit.scorecard.PartnerPointsMachine`, no reason codes) gives the joint
probabilities. Both Ginis are taken on the validation rows, with a paired bootstrap interval of their difference
(:func:`vsplit.report.credit.bootstrap_intervals`, seeded). :func:`label_stages` and :func:`partner_stages` are the
two sides as stages of a session (``(stage, machine)`` pairs), the same in ``vsplit bin`` and in the notebook.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0); y = rng.integers(0, 2, 400).astype(float)
    >>> out = gini_comparison(y, y * 0.2 + rng.random(400), y + rng.random(400), draws=50, seed=1)
    >>> out["joint"] > out["bank_only"], out["interval"][0] < out["difference"] < out["interval"][1]
    (True, True)
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from vsplit.woe.report import SCORECARD_SECTION as TITLE


def validation_rows(n: int, *, share: float, seed: int) -> np.ndarray:
    """A mask of ``round(share * n)`` of ``n`` aligned rows (at least one, at most ``n - 1``), drawn with ``seed``.

    >>> int(validation_rows(10, share=0.3, seed=0).sum())
    3
    """
    take = min(max(1, round(share * n)), n - 1)
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(seed).permutation(n)[:take]] = True
    return mask


def gini_comparison(y: np.ndarray, bank_only: np.ndarray, joint: np.ndarray, *, draws: int = 200,
                    seed: int = 0) -> dict[str, Any]:
    """Both Ginis on the rows ``y`` (0/1) and the joint's gain, with a paired bootstrap 95% interval of the gain."""
    from vsplit.report.credit import bootstrap_intervals, roc_auc

    y = np.asarray(y).astype(int)
    boot = bootstrap_intervals(y, joint, baseline=bank_only, draws=draws, seed=seed)
    bank_gini, joint_gini = 2 * roc_auc(y, bank_only) - 1, 2 * roc_auc(y, joint) - 1
    return {"rows": len(y), "events": int(y.sum()), "bank_only": bank_gini, "joint": joint_gini,
            "difference": joint_gini - bank_gini,
            "interval": None if boot["gain"] is None else [2 * g for g in boot["gain"]],
            "level": boot["level"], "draws": boot["draws"], "seed": seed}


def gini_markdown(out: dict[str, Any]) -> str:
    """The comparison as the value report's section."""
    interval = out["interval"]
    shown = "n/a" if interval is None else f"{interval[0]:+.4f} to {interval[1]:+.4f}"
    return "\n".join([
        f"Two scorecards fit on the aligned rows but {out['rows']:,} held out for validation ({out['events']:,} "
        "events): one on the bank's own selected attributes, one joint with every partner's (trained across the "
        "cut; a partner cannot tell which rows are held out). Gini on the validation rows:", "",
        "| scorecard | Gini |", "| --- | ---: |", f"| bank alone | {out['bank_only']:.4f} |",
        f"| joint | {out['joint']:.4f} |", f"| gain | {out['difference']:+.4f} |",
        f"| gain, paired bootstrap {out['level']:.0%} interval | {shown} |", "",
        f"Interval: {out['draws']} bootstrap resamples of the validation rows (seed {out['seed']}), both scorecards "
        "scored on each. An interval above 0 says the partners' attributes add to the bank's own."])


def label_stages(columns: Any, *, labels: np.ndarray, partners: Sequence[str], params: Any, scaling: Any,
                 share: float, seed: int, draws: int = 200, name: str = "bank",
                 **keys: Any) -> Generator[tuple[str, Any], Any, dict[str, Any]]:
    """The label party's side: ``columns`` (its selected attributes' :class:`~vsplit.scorecard.WoeColumns` of the
    aligned rows) and ``labels``; ``keys``: the homomorphic key options of
    :class:`~vsplit.scorecard.LabelScorecard`. Returns :func:`gini_comparison`'s figures."""
    from vsplit.scorecard import LabelPoints, LabelScorecard, PointsTable, fit_pooled, sigmoid

    y = np.asarray(labels, dtype=np.float64)
    valid = validation_rows(len(y), share=share, seed=seed)
    x = columns.matrix()
    coef, intercept = fit_pooled(x[~valid], y[~valid], params=params)
    alone = sigmoid(x[valid] @ coef + intercept)
    coef, intercept = yield "gini train", LabelScorecard(x, labels=y, partners=partners, params=params,
                                                         scaling=scaling, fit_rows=~valid, **keys)
    table = PointsTable.of(names=columns.names, labels=columns.labels, woe=columns.woe, coef=coef, scaling=scaling)
    points = yield "gini score", LabelPoints(table, own_codes=columns.codes, base_points=scaling.base_points(intercept),
                                             partners=partners, name=name)
    joint = sigmoid(scaling.log_odds(points.score))[valid]
    return gini_comparison(y[valid], alone, joint, draws=draws, seed=seed)


def add_to_report(report: Any, out: dict[str, Any]) -> None:
    """Put the comparison ``out`` in the value report ``report`` (its figures and its section)."""
    report.gini = out
    report.sections[TITLE] = gini_markdown(out)


def partner_stages(columns: Any, *, label: str, **keys: Any) -> Generator[tuple[str, Any], Any, None]:
    """A partner's side: its selected attributes' :class:`~vsplit.scorecard.WoeColumns` of the aligned rows, trained
    jointly, then its points of every aligned row; ``keys``: :class:`~vsplit.scorecard.PartnerScorecard`'s key
    options. It shares neither names nor points (the scorecard is the report's, not a model)."""
    from vsplit.scorecard import PartnerPointsMachine, PartnerScorecard

    machine = PartnerScorecard(columns, label=label, share_names=False, share_points=False, **keys)
    yield "gini train", machine
    yield "gini score", PartnerPointsMachine(machine.points_table(), codes=columns.codes, label=label,
                                             share_reasons=False)
