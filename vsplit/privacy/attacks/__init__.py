"""Attacks, each from one party's view of training: what the feature party can learn of the labels, what the label
party can learn of a feature party's columns, and a monitor a feature party can run against a hijacking label party.
"""

from vsplit.privacy.attacks.hijack_monitor import Alarm, HijackMonitor, concentration
from vsplit.privacy.attacks.label_leakage import (
    DirectionScoring,
    LeakSummary,
    NormScoring,
    chance_leak_auc,
    leak_auc,
)
from vsplit.privacy.attacks.model_completion import CompletionReport, model_completion
from vsplit.privacy.attacks.reconstruction import ReconstructionReport, reconstruct_features

__all__ = [
    "Alarm",
    "CompletionReport",
    "DirectionScoring",
    "HijackMonitor",
    "LeakSummary",
    "NormScoring",
    "ReconstructionReport",
    "chance_leak_auc",
    "concentration",
    "leak_auc",
    "model_completion",
    "reconstruct_features",
]
