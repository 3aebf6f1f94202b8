"""Many clients with the same columns: the federated pieces the horizontal schedules call.

- :mod:`vsplit.federated.averaging`: row-weighted averages of state dicts and optimizer states (torch).
- :mod:`vsplit.federated.quantize`: fixed point modulo 2^k for secure aggregation (NumPy only).
- :mod:`vsplit.federated.secure_agg`: pairwise-masked secure aggregation, sans-IO client and server machines
  (NumPy and ``cryptography`` only).

Importing this package imports none of them, so ``import vsplit`` stays light.
"""
