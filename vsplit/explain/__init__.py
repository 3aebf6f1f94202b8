"""What a model validator asks of a split model: per-party attributions and reason codes, calibration.

- :mod:`vsplit.explain.paths`, :mod:`~vsplit.explain.machine`, :mod:`~vsplit.explain.messages`: integrated gradients
  through the cuts, each party computing its own columns' share (``SplitClassifier.explain``, ``vsplit explain``);
- :mod:`vsplit.explain.reasons`: adverse-action reason codes from an explanation;
- :mod:`vsplit.explain.calibration`: reliability, Brier score, expected calibration error, and the label party's
  temperature or isotonic calibration.

Nothing is imported here: each module pulls in what it needs (torch only where a model runs).
"""
