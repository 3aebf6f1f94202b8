"""Privacy toolkit: attacks that measure what leaks across the cut, and defenses that reduce it at a known cost.

* :mod:`vsplit.privacy.attacks`: label leakage from gradients (norm and direction scoring), model completion, feature
  reconstruction, and an experimental monitor for hijacked training.
* :mod:`vsplit.privacy.defenses`: gradient clipping plus noise, ``max_norm``, Marvell, label DP by randomized
  response, embedding noise and NoPeek, each a plug-in named by a config string.
* :func:`audit`: runs training with each defense and every attack; an :class:`AuditReport` of utility and leakage.
* :func:`audit_topology`: the same for vanilla and U-shaped splits: inversion of activations at every cut
  (:func:`white_box_inversion`, :func:`black_box_inversion`), a hijacking server (:class:`FshaServer`) against the
  client's detectors (:func:`make_detector`: SplitGuard, the Gradients Scrutinizer, SplitOut), U-shaped label leakage.

Example:
    >>> from vsplit.privacy import make_defense
    >>> make_defense("label_dp:epsilon=1").guarantee(n_train=1000, batch_size=100, epochs=5, delta=1e-5).epsilon
    1.0
"""

from typing import TYPE_CHECKING

from vsplit.lazy import lazy_attributes

#: Public names imported on first use (the attacks and defenses need PyTorch): name -> "module:attribute".
_LAZY = {
    "ATTACKS": "vsplit.privacy.audit:ATTACKS",
    "AuditData": "vsplit.privacy.audit:AuditData",
    "AuditReport": "vsplit.privacy.report:AuditReport",
    "DEFENSES": "vsplit.privacy.defenses.registry:DEFENSES",
    "Defense": "vsplit.privacy.defenses.registry:Defense",
    "DirectionScoring": "vsplit.privacy.attacks:DirectionScoring",
    "EmbeddingTap": "vsplit.privacy.hooks:EmbeddingTap",
    "FshaServer": "vsplit.privacy.attacks.fsha:FshaServer",
    "TopologyReport": "vsplit.privacy.topology_audit:TopologyReport",
    "audit_topology": "vsplit.privacy.topology_audit:audit_topology",
    "black_box_inversion": "vsplit.privacy.attacks.inversion:black_box_inversion",
    "make_detector": "vsplit.privacy.detectors.registry:make_detector",
    "white_box_inversion": "vsplit.privacy.attacks.inversion:white_box_inversion",
    "Guarantee": "vsplit.privacy.accounting:Guarantee",
    "HijackMonitor": "vsplit.privacy.attacks:HijackMonitor",
    "NormScoring": "vsplit.privacy.attacks:NormScoring",
    "audit": "vsplit.privacy.audit:audit",
    "leak_auc": "vsplit.privacy.attacks:leak_auc",
    "make_defense": "vsplit.privacy.defenses.registry:make_defense",
    "merge_hooks": "vsplit.privacy.hooks:merge_hooks",
    "model_completion": "vsplit.privacy.attacks:model_completion",
    "reconstruct_features": "vsplit.privacy.attacks:reconstruct_features",
    "run_once": "vsplit.privacy.audit:run_once",
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

if TYPE_CHECKING:  # for type checkers and IDEs only
    from vsplit.privacy.accounting import Guarantee
    from vsplit.privacy.attacks import (
        DirectionScoring,
        HijackMonitor,
        NormScoring,
        leak_auc,
        model_completion,
        reconstruct_features,
    )
    from vsplit.privacy.attacks.fsha import FshaServer
    from vsplit.privacy.attacks.inversion import black_box_inversion, white_box_inversion
    from vsplit.privacy.audit import ATTACKS, AuditData, audit, run_once
    from vsplit.privacy.defenses.registry import DEFENSES, Defense, make_defense
    from vsplit.privacy.detectors.registry import make_detector
    from vsplit.privacy.hooks import EmbeddingTap, merge_hooks
    from vsplit.privacy.report import AuditReport
    from vsplit.privacy.topology_audit import TopologyReport, audit_topology

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
    "FshaServer",
    "Guarantee",
    "HijackMonitor",
    "NormScoring",
    "TopologyReport",
    "audit",
    "audit_topology",
    "black_box_inversion",
    "leak_auc",
    "make_defense",
    "make_detector",
    "merge_hooks",
    "model_completion",
    "reconstruct_features",
    "run_once",
    "white_box_inversion",
]
