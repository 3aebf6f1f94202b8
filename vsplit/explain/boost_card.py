"""The model card of a boosted-trees run (``[model] kind = "boosting"``), built at the label party from its records.

The bank holds every tree and knows which party owns each split, so its card can list the trees (trained, kept after
early stopping, depth, learning rate and the other settings), the held-out loss after every tree, each party's share
of the splits and of the trees' gain in nodes, the test metrics, and what the protocol leaks (rows per node, split
ownership, partner bins' gradient shares). :func:`tree_section` is the part that needs only the trees.

Example:
    >>> from vsplit.boosting.trees import BoostModel, Split, Tree
    >>> tree = Tree(splits={0: Split(party=0, column=0, bin=1, missing_left=False),
    ...                     2: Split(party=1, column=3, bin=0, missing_left=True, record=0)},
    ...             leaves={1: -0.5, 5: 0.25, 6: 0.75})
    >>> section = tree_section(BoostModel(trees=(tree,), base=0.0, widths=(4, 3)), parties=["bank", "shop"])
    >>> section["splits"], section["depth"], section["leaves"]
    ({'bank': 1, 'shop': 1}, 2, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: what every boosting card says the model cannot do
LIMITS = (
    "Customers a partner does not know are not scored (listed, not dropped): there is no bank-only model for trees.",
    "Binary classification with logistic loss only.",
    "Contributions (vsplit explain) are path attributions (Saabas): each split's change of the node value goes to "
    "the party owning it; they add up to the margin, but unlike SHAP values they depend on the order of the splits "
    "(docs/boosting.md).",
    "Metrics hold for the population of the test rows; monitor the stability index after deployment.",
)


def tree_section(model: Any, *, parties: Sequence[str], trained: int | None = None,
                 losses: Sequence[float] = ()) -> dict[str, Any]:
    """The trees of ``model`` (``parties``: the label party, then the partners in the trees' order): how many (and
    how many were ``trained`` before early stopping kept these), the deepest, leaves, splits per party and their
    share, the held-out loss after every tree trained (``losses``)."""
    counts = np.zeros(len(parties), dtype=np.int64)
    for tree in model.trees:
        for split in tree.splits.values():
            counts[split.party] += 1
    total = int(counts.sum())
    return {"kept": len(model.trees), "trained": len(model.trees) if trained is None else int(trained),
            "depth": max((t.depth for t in model.trees), default=0),
            "leaves": sum(len(t.leaves) for t in model.trees),
            "splits": {p: int(n) for p, n in zip(parties, counts, strict=True)},
            "share": {p: (float(n) / total if total else 0.0) for p, n in zip(parties, counts, strict=True)},
            "validation_loss": [float(v) for v in losses]}


def boost_card(node: Any, result: Any, scored: Any = None, y: np.ndarray | None = None) -> dict[str, Any]:
    """The card of a label party's boosting run in its process (``node``: its
    :class:`~vsplit.node.boost.BoostNode`, ``result``: its :class:`~vsplit.node.boost.BoostResult`)."""
    from vsplit.explain.card import metrics_section

    config, b, t = node.config, node.config.boosting, node.config.train
    parties = [node.name, *node.partners]
    trees = tree_section(node.model, parties=parties, trained=result.trees, losses=result.validation_losses)
    recipe = {"trees": b.trees, "max_depth": b.max_depth, "learning_rate": b.learning_rate,
              "reg_lambda": b.reg_lambda, "gamma": b.gamma, "min_child_weight": b.min_child_weight,
              "max_bins": b.max_bins, "min_node_rows": b.min_node_rows, "scheme": b.scheme, "key_bits": b.key_bits,
              "goss_top_rate": b.goss_top_rate, "goss_other_rate": b.goss_other_rate,
              "early_stopping_rounds": b.early_stopping_rounds, "order_categories": b.order_categories,
              "min_category_rows": b.min_category_rows,
              "kept_trees": trees["kept"], "seed": t.seed}
    if b.early_stopping_rounds:
        recipe["validation_fraction"] = t.validation_fraction
    psi = (result.psi or {}).get("train", {})
    records = {p: trees["splits"][p] for p in node.partners}
    card: dict[str, Any] = {
        "title": f"{config.output.run_id} (vertical boosted trees, labels at {node.name})",
        "data": {"rows": {node.name: psi.get("size"), **psi.get("peer_sizes", {})},
                 "intersection": psi.get("intersection"), "test_rows": None if y is None else len(y)},
        "topology": {"kind": "vertical boosted trees",
                     "segments": [f"trees at {node.name}: every split's owner, its own thresholds and every leaf",
                                  *(f"records at {p}: the column, threshold bin and missing direction of its "
                                    f"{records[p]} winning splits, never sent" for p in node.partners)],
                     "cuts": [f"{p} -> {node.name}: one decision bit per record and customer at prediction "
                              f"({records[p]} bits a customer)" for p in node.partners]},
        "recipe": {k: str(v) for k, v in recipe.items()},
        "trees": trees,
        "privacy": {"defenses": [], "notes": [
            "every partner sees the rows of every node of every tree (which customers fall together)",
            "the bank learns which party owns each split, which rows go left at a partner's split, and per node "
            "each partner bin's share of the gradient sums (a bin of one customer tells the bank that customer's "
            f"range of the partner's column); a partner refuses to sum a node of fewer than min_node_rows = "
            f"{b.min_node_rows} rows",
            *(["GOSS: a partner learns which rows each tree sampled, the largest gradients among them"]
              if b.goss_top_rate > 0 else []),
            *(["ordered categories: each partner learns the order of its categories by the bank's smoothed label "
               f"rate on the training rows (a category of fewer than {b.min_category_rows} rows keeps its place), and "
               "the bank which partner columns are categorical"]
              if b.order_categories else []),
            "no label, gradient or hessian crosses in the clear; see docs/boosting.md (what each party learns)"]},
        "limits": list(LIMITS),
    }
    if y is not None and scored is not None and len(set(np.asarray(y).tolist())) == 2:
        card["metrics"] = metrics_section(np.asarray(y).astype(int), np.asarray(scored.proba), seed=t.seed)
    return card
