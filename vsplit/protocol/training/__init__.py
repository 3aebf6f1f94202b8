"""Split training as one sans-IO machine for every party of every topology (:class:`SplitMachine`)."""

from vsplit.protocol.training.machine import SplitMachine, TrainingResult
from vsplit.protocol.training.plan import Plan

__all__ = ["Plan", "SplitMachine", "TrainingResult"]
