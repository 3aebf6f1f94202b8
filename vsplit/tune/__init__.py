"""Split-aware hyper-parameter search: the label party proposes, each partner accepts only values inside its bounds.

In a notebook, :meth:`vsplit.estimator.SplitClassifier.tune` runs :mod:`vsplit.tune.study` on every party's table.
Between organizations, ``vsplit tune --config party.toml`` runs :mod:`vsplit.tune.between` at each party: the rounds
of :mod:`vsplit.tune.rounds` (messages in :mod:`vsplit.tune.messages`) over its mutual-TLS links, each accepted trial
trained by :mod:`vsplit.tune.trial`, and each party's ready-to-run best config written by :mod:`vsplit.tune.best`.
The knobs and bounds are :mod:`vsplit.tune.space`; a party's ``[tune]`` table, :mod:`vsplit.tune.settings`.
"""
