"""Split training as sans-IO machines: :class:`LabelTrainer` at the label party, :class:`FeatureTrainer` elsewhere."""

from vsplit.protocol.training.feature import FeatureTrainer
from vsplit.protocol.training.label import LabelTrainer, TrainingResult
from vsplit.protocol.training.plan import Plan

__all__ = ["FeatureTrainer", "LabelTrainer", "Plan", "TrainingResult"]
