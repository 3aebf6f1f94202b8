"""The report of a boosting run: the label party's ``report.json`` (schema ``vsplit-report-1``) and ``report.md``,
or a partner's own, so that ``vsplit report --run`` merges and checks a boosting run as it does a network run.

Theory of operation. The label party scores the shared test customers with the trees; from those scores come the
test metrics (:func:`vsplit.metrics.binary_metrics`, with the AUC of ``result.json``), the credit figures with their
bootstrap interval (:func:`vsplit.report.credit_view.credit_section`, seeded by ``train.seed``), and the ROC, KS and
AUC plots. What applies only to networks is left out: there is no training history of epochs (the model section
names the trees, the trees kept, depth and learning rate, and the held-out loss per tree), and no bank-alone
baseline (trees have no bank-only model, so ``baselines`` is empty and the report says so). A partner, or a label
party without a test set, writes the partner-shaped report: its traffic, PSI and time.

Example:
    >>> section = model_section(trees=5, kept_trees=4, max_depth=3, learning_rate=0.3, validation_losses=[0.5])
    >>> section["kind"], section["kept_trees"], section["validation_losses"]
    ('boosting', 4, [0.5])
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np


def model_section(*, trees: int, kept_trees: int | None, max_depth: int, learning_rate: float,
                  validation_losses: list[float]) -> dict[str, Any]:
    """The report's ``model``: what the boosted trees are."""
    return {"kind": "boosting", "trees": trees, "kept_trees": kept_trees, "max_depth": max_depth,
            "learning_rate": learning_rate, "validation_losses": validation_losses}


def write_boost_report(node: Any, result: Any, scored: Any, y: np.ndarray | None) -> Path:
    """Write ``node``'s report (a :class:`~vsplit.node.boost.BoostNode` after ``finish``'s ``result``; ``scored``
    and ``y``: the label party's scored test customers and their labels, or ``None``); return ``report.md``."""
    from vsplit.report import write_label_report, write_partner_report

    common: dict[str, Any] = {
        "run_id": node.config.output.run_id, "party": node.name, "role": node.role,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": result.seconds,
        "config_hashes": {node.name: node.config_hash()}, "topology": node.topology.kind,
        "model": model_section(trees=result.trees, kept_trees=result.kept_trees, max_depth=node.params.max_depth,
                               learning_rate=node.params.learning_rate, validation_losses=result.validation_losses)}
    if node.role != "label" or scored is None or y is None or not result.test or result.test.get("auc") is None:
        extra = {"metrics": result.test} if result.test else {}
        return write_partner_report(node.folder, {**common, "communication": result.comm, "psi": result.psi,
                                                  **extra})
    from vsplit.metrics import binary_metrics
    from vsplit.report import write_plots
    from vsplit.report.credit_view import credit_section

    proba = np.asarray(scored.proba, dtype=np.float64)
    metrics = {**binary_metrics(y, proba), **result.test}  # the AUC and count of result.json
    plots = write_plots(node.folder, y=y, proba=proba, history=[], aucs={"split": metrics["auc"]})
    (node.folder / plots.pop("history")).unlink(missing_ok=True)  # no epochs: the model section lists the trees
    credit = credit_section(node.folder, y=y, proba=proba, seed=node.config.train.seed)
    plots.update(credit.pop("plots"))
    report = {**common, "metrics": metrics, "baselines": {}, "history": [], "psi": result.psi,
              "communication": {node.name: {"sent": result.comm["sent"], "received": result.comm["received"]}},
              "plots": plots, **credit}
    return write_label_report(node.folder, report)
