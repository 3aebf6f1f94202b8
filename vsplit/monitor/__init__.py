"""Is the population still the one the model was trained on? The population stability index (named
``population_stability`` here: in vsplit, PSI means private set intersection) per column, per embedding dimension and
for the score (:mod:`vsplit.monitor.stability`), and ``vsplit monitor`` (:mod:`vsplit.monitor.process`).
"""
