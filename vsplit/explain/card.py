"""Build a model card (:mod:`vsplit.report.card`) from a run's own records: in one process from a fitted estimator
(:func:`model_card`), or at the label party's process at the end of training (:func:`run_card`).

Example:
    >>> import numpy as np, pandas as pd
    >>> y = np.array([0, 1] * 50); p = np.clip(y * 0.6 + np.linspace(0, 0.4, 100), 0, 1)
    >>> table = fairness_slices(y, p, pd.Series(["a", "b"] * 50), decline_when="high", threshold=0.5)
    >>> [s["slice"] for s in table], table[0]["rows"]
    (['a', 'b'], 50)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from vsplit.config.recipe import recipe_settings
from vsplit.explain.calibration import brier_score, expected_calibration_error, reliability_curve
from vsplit.metrics import roc_auc
from vsplit.report.credit import bootstrap_intervals

#: where the docs say how leakage is measured (``vsplit privacy audit``); a path in the repository's docs
PRIVACY_AUDIT = "docs/privacy.md#measured-results"


def people_epoch(epoch: int | None) -> int | None:
    """An epoch as people count it, from 1 (the report's "chosen epoch"); training counts from 0.

    >>> people_epoch(22), people_epoch(None)
    (23, None)
    """
    return None if epoch is None else int(epoch) + 1


#: what every card says a split model cannot do, whatever the run
LIMITS = (
    "Customers a partner does not know cannot be scored by the split model (they are listed, not dropped); the "
    "bank-only fallback, where trained, scores them with the bank's own columns.",
    "Attributions are integrated gradients of the log-odds from each party's mean row: exact for a piecewise-linear "
    "network (ReLU, linear layers, embeddings: they sum to the score difference up to float64 rounding), else a "
    "Gauss-Legendre quadrature (up to its error); they describe the model, not causes in the population.",
    "The bank sees a partner's contribution only as one group (and the partner's top column names where its "
    "config shares them); the partner keeps its per-column attributions.",
    "Metrics hold for the population of the test rows; monitor the stability index (vsplit monitor) after "
    "deployment.",
)


def fairness_slices(y: np.ndarray, proba: np.ndarray, column: pd.Series, *, decline_when: str, threshold: float,
                    bands: int = 4) -> list[dict[str, Any]]:
    """AUC and approval rate per slice of ``column`` (a number with more than ``bands`` values is cut into
    ``bands`` quantile bands)."""
    values = pd.Series(np.asarray(column)).reset_index(drop=True)
    if pd.api.types.is_numeric_dtype(values) and values.nunique() > bands:
        values = pd.qcut(values, bands, duplicates="drop").astype(str)
    approve = proba < threshold if decline_when == "high" else proba >= threshold
    out = []
    for key in sorted(values.astype(str).unique()):
        inside = (values.astype(str) == key).to_numpy()
        auc = roc_auc(y[inside], proba[inside]) if len(np.unique(y[inside])) == 2 else float("nan")
        out.append({"slice": key, "rows": int(inside.sum()), "auc": float(auc),
                    "approval_rate": float(approve[inside].mean())})
    return out


def metrics_section(y: np.ndarray, raw: np.ndarray, calibrated: np.ndarray | None = None, *, draws: int = 200,
                    seed: int = 0) -> dict[str, Any]:
    """AUC with its bootstrap interval, Brier score, expected calibration error and the reliability curve (and the
    calibrated probabilities' where given)."""
    boot = bootstrap_intervals(y, raw, draws=draws, seed=seed)
    out = {"auc": roc_auc(y, raw), "auc_interval": boot["auc"], "level": boot["level"], "draws": boot["draws"],
           "rows": len(y), "brier": brier_score(y, raw), "ece": expected_calibration_error(y, raw),
           "curve": reliability_curve(y, raw).to_dict(orient="list")}
    if calibrated is not None:
        out["brier_calibrated"] = brier_score(y, calibrated)
        out["ece_calibrated"] = expected_calibration_error(y, calibrated)
        out["curve_calibrated"] = reliability_curve(y, calibrated).to_dict(orient="list")
    return out


def topology_section(topology: Any) -> dict[str, Any]:
    return {"kind": topology.kind,
            "segments": [f"{s.name} at {s.owner}" + (f", reads {', '.join(s.inputs)}" if s.inputs else
                                                      ", reads its owner's rows") for s in topology.segments],
            "cuts": [f"{c.src} ({c.src_owner}) -> {c.dst}, width {'x'.join(map(str, c.shapes[0]))}"
                     for c in topology.cuts]}


RECIPE_KEYS = ("epochs", "batch_size", "optimizer", "lr", "weight_decay", "lr_schedule", "ema", "embedding_width",
               "bottom_hidden", "top_hidden", "merge", "dropout", "numeric_embedding", "members", "validation_fraction",
               "patience", "monitor", "random_state")


def model_card(estimator: Any, train_views: Mapping[str, pd.DataFrame], test_views: Mapping[str, pd.DataFrame], *,
               explanation: Any = None, fairness_column: str | None = None, decline_when: str = "high",
               threshold: float = 0.5, privacy: Mapping[str, Any] | None = None, limits: Sequence[str] = (),
               date_range: str | None = None, draws: int = 200, title: str | None = None) -> dict[str, Any]:
    """The card of a fitted estimator: trained on ``train_views``, measured on ``test_views`` (the label party's
    ``fairness_column`` slices them); ``explanation`` adds the global importances."""
    est = estimator
    label = est.label_party
    calibrator = getattr(est, "calibrator_", None)
    est.calibrator_ = None
    try:
        y, raw, known = est._targets(test_views)
    finally:
        est.calibrator_ = calibrator
    y, raw = y[known].astype(int), raw[known]
    params = est.get_params()
    recipe = {k: str(params[k]) for k in RECIPE_KEYS if k in params}
    recipe["chosen_epoch"] = str(people_epoch(est.best_epoch_))
    card: dict[str, Any] = {
        "title": title or f"{est.topology_.kind} split, labels at {label}",
        "data": {"rows": {n: len(v) for n, v in train_views.items()}, "intersection": int(est.n_aligned_),
                 "test_rows": int(known.sum()), "date_range": date_range},
        "topology": topology_section(est.topology_), "recipe": recipe,
        "metrics": metrics_section(y, raw, calibrator.apply(raw) if calibrator is not None else None, draws=draws,
                                   seed=est.random_state),
        "privacy": dict(privacy or {"defenses": [], "notes": [
            f"no leakage measured in this run: vsplit privacy audit measures it ({PRIVACY_AUDIT})"]}),
        "limits": [*LIMITS, *limits],
    }
    if explanation is not None:
        card["importance"] = {k: float(v) for k, v in explanation.global_importance().items()}
        error = explanation.completeness_error()
        card["limits"].append(f"Attributions: {explanation.method_text()}; the attributions of a row sum to its score "
                              f"difference within {float(error.max()):.2g} (largest over {len(error)} rows). Exact "
                              "integration needs a piecewise-linear network (linear layers, ReLU, embeddings, "
                              "binned numbers); any other segment falls back to the quadrature, which the line above "
                              "then names.")
    if fairness_column is not None:
        table = test_views[label].reset_index(drop=True)
        if fairness_column not in table.columns:
            from vsplit.errors import ConfigError

            raise ConfigError(f"fairness_column {fairness_column!r} is not a column of {label!r}'s test view")
        card["fairness"] = {"column": fairness_column, "slices": fairness_slices(
            y, raw, table[fairness_column][known], decline_when=decline_when, threshold=threshold)}
    return card


def run_card(node: Any, scored: Any, y: np.ndarray, result: Any) -> dict[str, Any]:
    """The card of a label party's training run in its process, from its config, PSI counts and test scores."""
    config = node.config
    ex = config.explain
    t, m = config.train, config.model
    batch = getattr(node, "batch_size_used", None) or t.batch_size  # train.batch_size left out: the one used
    recipe = {"epochs": t.epochs, "batch_size": batch, "optimizer": t.optimizer, "lr": t.lr,
              "lr_schedule": t.lr_schedule, "ema": recipe_settings(config)["ema"], "embedding_width": m.embedding_width,
              "bottom_hidden": m.bottom_hidden, "top_hidden": m.top_hidden,
              "numeric_embedding": m.numeric_embedding, "seed": t.seed, "chosen_epoch": people_epoch(result.best_epoch)}
    kinds = [getattr(party, "numeric_kind", None) for party in getattr(node, "networks", [node.party])]
    if kinds and kinds[0] is not None:  # this party's own bottoms, "auto" resolved (a bag's in turn: one per network)
        recipe["numeric_embedding"] = kinds[0] if len(kinds) == 1 else kinds
    if t.networks > 1:  # a bag: the metrics are the mean's; each network's seed and chosen epoch are in result.json
        recipe.update(networks=t.networks, chosen_epoch=[people_epoch(n["best_epoch"]) for n in result.networks]
                      or people_epoch(result.best_epoch))
    psi = (result.psi or {}).get("train", result.psi or {})
    sizes = {node.name: psi.get("size", len(node.table) if node.table is not None else 0),
             **psi.get("peer_sizes", {})}
    card: dict[str, Any] = {
        "title": f"{config.output.run_id} ({node.topology.kind} split, labels at {node.name})",
        "data": {"rows": sizes, "intersection": psi.get("intersection"), "test_rows": len(y)},
        "topology": topology_section(node.topology), "recipe": {k: str(v) for k, v in recipe.items()},
        "metrics": metrics_section(y, scored.proba, seed=t.seed),
        "privacy": {"defenses": list(config.privacy.defenses), "notes": [
            f"leakage is measured by vsplit privacy audit ({PRIVACY_AUDIT}), not by this run"]},
        "limits": [*LIMITS, "Global importances and reason codes: run vsplit explain (docs/governance.md)." if
                   t.networks == 1 else f"A bag of {t.networks} networks (train.networks) scores with the mean of "
                   "their probabilities; vsplit explain explains one network and refuses a bag."],
    }
    column = ex.fairness_column
    if column is not None and column in scored.table.columns:
        card["fairness"] = {"column": column, "slices": fairness_slices(
            y, scored.proba, scored.table[column].to_numpy()[scored.rows], decline_when=ex.decline_when,
            threshold=ex.threshold)}
    return card
