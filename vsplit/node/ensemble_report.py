"""The report of an ensemble run: the label party's ``report.json`` (schema ``vsplit-report-1``) and ``report.md``,
or a partner's own, so that ``vsplit report --run`` merges and checks an ensemble run as it does a network run.

Theory of operation. The label party scores the shared test customers with both parts and combines them with the
run's weight; from the combination come the test metrics (:func:`vsplit.metrics.binary_metrics`, with the AUC of
``result.json``), the credit figures with their bootstrap interval (:func:`vsplit.report.credit_view.credit_section`,
seeded by ``train.seed``) and the ROC, KS and AUC plots, as a boosting run's (:mod:`vsplit.node.boost_report`). The
model section says what the ensemble is: its networks, its second part (trees or a scorecard), the weight, every
candidate weight's AUC on the set-aside rows, the parts' and the combination's AUC there, and each part's own test
metrics (``parts``), so a validator sees what the combination adds. The history is the networks' (the first
network's epochs). The bank's own model (the fallback a network run trains, ``networks/fallback.npz``) is the
bank-alone baseline and scores the test customers a partner does not know (``coverage``). A partner, or a label
party without a test set, writes the partner-shaped report: its traffic, PSI and time.

Example:
    >>> section = model_section(networks=5, second="trees", weight=0.75, weight_scores=[[0.5, 0.8], [0.75, 0.81]],
    ...                         validation_auc={"networks": 0.8}, trees=120, refit=True)
    >>> section["kind"], section["weight"], section["second"]
    ('ensemble', 0.75, 'trees')
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np


def model_section(*, networks: int, second: str, weight: float | None, weight_scores: list[list[float]],
                  validation_auc: dict[str, float], trees: int, refit: bool,
                  parts: dict[str, dict[str, float]] | None = None, weight_rule: str | None = None) -> dict[str, Any]:
    """The report's ``model``: what the ensemble is and how its weight was chosen (``weight_rule``; ``parts``: each
    part's test metrics, when the label party scored a test table)."""
    out: dict[str, Any] = {"kind": "ensemble", "networks": networks, "second": second, "weight": weight,
                           "weight_rule": weight_rule, "weight_scores": weight_scores,
                           "validation_auc": validation_auc, "trees": trees, "refit": refit}
    if parts is not None:
        out["parts"] = parts
    return out


def write_ensemble_report(node: Any, result: Any, scored: Any, y: np.ndarray | None) -> Path:
    """Write ``node``'s report (a :class:`~vsplit.node.ensemble.EnsembleNode` after ``finish``'s ``result``;
    ``scored`` and ``y``: the label party's :class:`~vsplit.node.ensemble.Combined` test scores and their labels, or
    ``None``); return ``report.md``."""
    from vsplit.node.aligned import AlignedNode
    from vsplit.report import write_label_report, write_partner_report

    labelled = (node.role == "label" and scored is not None and y is not None and result.test is not None
                and result.test.get("auc") is not None)
    parts = None
    if labelled:
        from vsplit.metrics import binary_metrics

        parts = {name: binary_metrics(y, 1 / (1 + np.exp(-np.asarray(z, dtype=np.float64))))
                 for name, z in (("networks", scored.networks), (node.second, scored.trees))}
    common: dict[str, Any] = {
        "run_id": node.config.output.run_id, "party": node.name, "role": node.role,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": result.seconds,
        "config_hashes": {node.name: AlignedNode.config_hash(node)}, "topology": node.config.topology.kind,
        "model": model_section(networks=int(node.config.ensemble.networks), second=node.second, weight=result.weight,
                               weight_scores=result.weight_scores, validation_auc=result.validation_auc,
                               trees=result.trees, refit=result.refit, parts=parts,
                               weight_rule=result.weight_rule)}
    if not labelled:
        extra = {"metrics": result.test} if result.test else {}
        return write_partner_report(node.folder, {**common, "communication": result.comm, "psi": result.psi,
                                                  **extra})
    from vsplit.metrics import binary_metrics
    from vsplit.report import write_plots
    from vsplit.report.credit_view import credit_section

    proba = node.combine(scored)
    metrics = {**binary_metrics(y, proba), **result.test}  # the AUC and count of result.json
    history = [dict(h) for h in (result.history or [])]
    plots = write_plots(node.folder, y=y, proba=proba, history=history, aucs={"split": metrics["auc"]})
    if not history:
        (node.folder / plots.pop("history")).unlink(missing_ok=True)
    coverage = getattr(node.nets, "coverage", None)  # the bank-only fallback on the test table, if trained
    credit = credit_section(node.folder, y=y, proba=proba, coverage=coverage, rows=scored.rows,
                            seed=node.config.train.seed)
    plots.update(credit.pop("plots"))
    report = {**common, "metrics": metrics, "baselines": dict(result.baselines), "history": history,
              "best_epoch": result.best_epoch,
              "psi": result.psi,
              "communication": {node.name: {"sent": result.comm["sent"], "received": result.comm["received"]}},
              "plots": plots, **credit}
    return write_label_report(node.folder, report)
