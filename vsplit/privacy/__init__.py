"""Privacy toolkit: attacks that measure what leaks across the cut, and defenses that reduce it at a known cost.

* :mod:`vsplit.privacy.attacks`: label leakage from gradients (norm and direction scoring), model completion, feature
  reconstruction, and an experimental monitor for hijacked training.
* :mod:`vsplit.privacy.defenses`: gradient clipping plus noise, ``max_norm``, Marvell, label DP by randomized
  response, embedding noise and NoPeek, each a plug-in named by a config string.
* :func:`audit`: runs training with each defense and every attack; an :class:`AuditReport` of utility and leakage.

Example:
    >>> make_defense("label_dp:epsilon=1").guarantee(n_train=1000, batch_size=100, epochs=5, delta=1e-5).epsilon
    1.0
"""

from vsplit.privacy.accounting import Guarantee
from vsplit.privacy.attacks import (
    DirectionScoring,
    HijackMonitor,
    NormScoring,
    leak_auc,
    model_completion,
    reconstruct_features,
)
from vsplit.privacy.audit import ATTACKS, AuditData, audit, run_once
from vsplit.privacy.defenses import DEFENSES, Defense, make_defense
from vsplit.privacy.hooks import EmbeddingTap, merge_hooks
from vsplit.privacy.report import AuditReport

#: The settings ``vsplit privacy audit`` runs when no ``--defense`` is given.
DEFAULT_AUDIT_DEFENSES = (
    "none",
    "clip_noise",
    "max_norm",
    "marvell",
    "label_dp",
    "embedding_noise",
    "nopeek",
    "secretflow_embedding_dp",
    "secretflow_label_dp",
)

__all__ = [
    "ATTACKS",
    "DEFAULT_AUDIT_DEFENSES",
    "DEFENSES",
    "AuditData",
    "AuditReport",
    "Defense",
    "DirectionScoring",
    "EmbeddingTap",
    "Guarantee",
    "HijackMonitor",
    "NormScoring",
    "audit",
    "leak_auc",
    "make_defense",
    "merge_hooks",
    "model_completion",
    "reconstruct_features",
    "run_once",
]
