"""The model card of an ensemble run (``[model] kind = "ensemble"``), built at the label party from both parts.

The bank holds the top of every network, every tree (or the scorecard's coefficients) and the weight, so its card can
say what the ensemble is: the networks' topology and recipe, the second part's settings (the trees' section of a
boosting card: how many, each party's share of the splits), the weight and how it was chosen, the combination's test
metrics with their bootstrap interval and calibration, and what crosses the cut at prediction (each partner's
embeddings of every network, then its decision bits or its points, in one answer). The privacy notes are both parts'.

Example:
    >>> ensemble_limits(networks=5, second="trees", fallback=False)[0]
    'Customers a partner does not know are not scored (listed, not dropped): this run has no bank-only model.'
"""

from __future__ import annotations

from typing import Any

import numpy as np


def ensemble_limits(*, networks: int, second: str, fallback: bool = True) -> list[str]:
    """What every ensemble card says the model cannot do (``fallback``: the run trained the bank's own model)."""
    return [
        "Customers a partner does not know are scored by the bank's own model on its own columns (fallback.npz), "
        "which is weaker than the ensemble (the report's coverage section)." if fallback else
        "Customers a partner does not know are not scored (listed, not dropped): this run has no bank-only model.",
        "Binary classification only.",
        f"The score is a weighted sum of log-odds: the mean of {networks} networks' and the {second}'; reason codes "
        "come from vsplit explain (the same weighted sums of each part's contributions), not from /v1/score.",
        "Metrics hold for the population of the test rows; monitor the stability index after deployment.",
    ]


def ensemble_card(node: Any, result: Any, scored: Any = None, y: np.ndarray | None = None) -> dict[str, Any]:
    """The card of a label party's ensemble run in its process (``node``: its
    :class:`~vsplit.node.ensemble.EnsembleNode` after training, ``result``: its
    :class:`~vsplit.node.ensemble.EnsembleResult`; ``scored``, ``y``: its combined test scores and labels)."""
    from vsplit.explain.boost_card import tree_section
    from vsplit.explain.card import metrics_section, topology_section

    config, e, t, m = node.config, node.config.ensemble, node.config.train, node.config.model
    second = node.second
    nets_topology = topology_section(node.nets.topology)
    recipe: dict[str, Any] = {"networks": e.networks, "weight": result.weight, "second": second,
                              "weight_fraction": e.weight_fraction, "refit": result.refit, "epochs": t.epochs,
                              "optimizer": t.optimizer, "lr": t.lr, "bottom_hidden": m.bottom_hidden,
                              "top_hidden": m.top_hidden, "numeric_embedding": m.numeric_embedding, "seed": t.seed}
    card: dict[str, Any] = {
        "title": f"{config.output.run_id} (vertical split ensemble: {e.networks} networks and {second}, labels at "
                 f"{node.name})",
        "data": {"rows": {node.name: result.psi.get("train", {}).get("size"),
                          **result.psi.get("train", {}).get("peer_sizes", {})},
                 "intersection": result.psi.get("train", {}).get("intersection"),
                 "test_rows": None if y is None else len(y)},
        "topology": {"kind": "vertical split ensemble",
                     "segments": [*(f"networks: {s}" for s in nets_topology["segments"]),
                                  f"{second} at {node.name} and its partners (docs/ensemble.md)"],
                     "cuts": [*(f"networks: {c}" for c in nets_topology["cuts"]),
                              f"{second}: " + ("one decision bit per record and customer at prediction, in the same "
                                               "answer as the embeddings" if second == "trees" else
                                               "each partner's points per customer, in the same answer as the "
                                               "embeddings")]},
        "recipe": {k: str(v) for k, v in recipe.items()},
        "privacy": {"defenses": list(config.privacy.defenses), "notes": [
            "the networks: each partner sends its embeddings of every customer at every step and receives their "
            "gradients; leakage is measured by vsplit privacy audit, not by this run",
            "the trees: every partner sees the rows of every node of every tree; the bank learns which party owns "
            "each split and per node each partner bin's share of the gradient sums (docs/boosting.md)"
            if second == "trees" else
            "the scorecard: the bank learns each partner's WOE sums per bin, never its edges (docs/credit_scoring.md)",
            *(["the trees' ordered categories: each partner learns the order of its categories by the bank's "
               "smoothed label rate on the training rows, and the bank which partner columns are categorical"]
              if second == "trees" and config.boosting.order_categories else []),
            "no label, gradient or hessian crosses in the clear to a partner's trees; the weight stays at the bank"]},
        "limits": ensemble_limits(networks=e.networks, second=second,
                                  fallback=getattr(node.nets, "bank_only", None) is not None),
    }
    if second == "trees" and getattr(node.trees, "model", None) is not None:
        card["trees"] = tree_section(node.trees.model, parties=[node.name, *node.trees.partners],
                                     trained=result.trees)
    if y is not None and scored is not None and len(set(np.asarray(y).tolist())) == 2:
        card["metrics"] = metrics_section(np.asarray(y).astype(int), node.combine(scored), seed=t.seed)
    return card
