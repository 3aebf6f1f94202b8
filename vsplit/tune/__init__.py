"""Split-aware hyper-parameter search: the label party proposes, each partner accepts only values inside its bounds.

See :mod:`vsplit.tune.space` (the knobs and the bounds) and :mod:`vsplit.tune.study` (the Optuna study).
"""
