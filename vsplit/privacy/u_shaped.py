"""Label leakage in a U-shaped split: the server's norm and direction attacks on the gradients the client returns.

Theory of operation. In a U-shaped split the client keeps the first layers, the last layers and the labels; the
server runs the middle. The server never sees a label, but each step the client sends it the gradient of the loss
with respect to the middle's output, ``(p − y) · ∂logit/∂middle``: the same structure as the gradients a vertical
label party sends its partners (Li et al., ICLR 2022). So the server can run the same attacks, as observers of the
gradients it receives (:class:`~vsplit.privacy.attacks.label_leakage.NormScoring`, ``DirectionScoring``). The label
defenses run where they belong, at the client, on the gradients it sends (``clip_noise``, ``max_norm``, ``marvell``,
``label_dp``). Binary tasks only (the attacks score a positive class). The client's table is the preset's pooled
training table (the bank's and the partner's columns of their shared customers), so the U-shaped client holds all
the features and the labels.

Example:
    >>> from vsplit.privacy.synthetic import make_imbalanced_views
    >>> import pandas as pd
    >>> views = make_imbalanced_views(600, seed=0)
    >>> table = views["bank"].merge(views["partner"], on="customer_id")
    >>> run = run_u_shaped(table, table, defense="none", seed=0, label="y", positive_label=1, epochs=1)
    >>> run["direction_leak_auc"] > 0.6, 0.5 <= run["leak_auc_chance"] < 0.7
    (True, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from vsplit.party import binarise
from vsplit.privacy.attacks.label_leakage import DirectionScoring, NormScoring
from vsplit.privacy.defenses import Defense, make_defense
from vsplit.privacy.hooks import merge_hooks
from vsplit.privacy.report import AuditReport
from vsplit.protocol.training.hooks import TrainingHooks

CLIENT, SERVER = "client", "server"


def run_u_shaped(
    train: pd.DataFrame,
    test: pd.DataFrame,
    *,
    defense: str | Defense,
    seed: int,
    label: str,
    positive_label: Any,
    epochs: int = 10,
    batch_size: int = 256,
) -> dict[str, Any]:
    """Train a U-shaped split on ``train`` (one table: ID, features, label) with ``defense`` at the client, and
    measure the server's label attacks on what it received; ``test`` gives the test AUC."""
    from vsplit.estimator import SplitClassifier

    defense = make_defense(defense)
    norm, direction = NormScoring(), DirectionScoring()
    hooks = merge_hooks(defense.hooks(feature_parties=[CLIENT], seed=seed),
                        TrainingHooks(observers={SERVER: [norm, direction]}))
    clf = SplitClassifier(label_party=CLIENT, label=label, positive_label=positive_label, topology="u_shaped",
                          server=SERVER, epochs=epochs, batch_size=batch_size, random_state=seed, hooks=hooks)
    started = time.perf_counter()
    clf.fit({CLIENT: train})
    seconds = time.perf_counter() - started
    aligned = binarise(train[label], clf.label_party_.positive_label, label).numpy()[clf.rows_[CLIENT]]
    n, d = norm.summary(aligned), direction.summary(aligned)
    return {
        "defense": defense.config, "seed": seed, "test_auc": clf.evaluate({CLIENT: test})["auc"],
        "norm_leak_auc": n.mean, "norm_leak_auc_p95": n.p95, "direction_leak_auc": d.mean,
        "direction_leak_auc_p95": d.p95, "leak_auc_chance": n.chance, "epochs_run": len(clf.history_),
        "fit_seconds": seconds, **{f"cost.{k}": v for k, v in defense.stats().items()},
    }


def u_shaped_audit(
    preset_name: str,
    *,
    defenses: Sequence[str] = ("none", "clip_noise", "max_norm", "marvell", "label_dp"),
    seeds: Sequence[int] = (0, 1, 2),
    epochs: int = 10,
    batch_size: int = 256,
    progress: Callable[[str], None] | None = None,
) -> AuditReport:
    """The U-shaped label-leakage audit of a binary preset: one run per defense and seed, as an audit report."""
    from vsplit.datasets import preset

    configs = [make_defense(d).config for d in defenses]
    runs = []
    for seed in seeds:
        data = preset(preset_name, seed=seed)
        train, test = data.pooled("train"), data.pooled("test")
        for config in configs:
            run = run_u_shaped(train, test, defense=config, seed=seed, label=data.label,
                               positive_label=data.positive_label, epochs=epochs, batch_size=batch_size)
            runs.append(run)
            if progress is not None:
                progress(f"u_shaped seed {seed} {config}: test AUC {run['test_auc']:.4f}, norm leak "
                         f"{run['norm_leak_auc']:.3f}, direction leak {run['direction_leak_auc']:.3f} "
                         f"({run['fit_seconds']:.1f} s)")
    settings = {"source": preset_name, "topology": "u_shaped", "seeds": list(seeds), "epochs": epochs,
                "batch_size": batch_size}
    return AuditReport(source=f"{preset_name} (u_shaped)", runs=runs, settings=settings, defenses=configs)
