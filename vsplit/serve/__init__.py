"""Online joint scoring of a vertical split (``vsplit serve``): the bank's HTTP API and the partners' daemons.

See docs/serving.md. The wire: :mod:`.messages` (frozen dataclasses, keyed IDs, the pair digest), :mod:`.wire`
(frames over a mutual-TLS channel, counted by type), :mod:`.signing` (snapshot signatures). The models:
:mod:`.model` (a party's saved model, loaded as batch prediction loads it), :mod:`.encode` (the bank's fast path
from validated rows to model inputs), :mod:`.table` (embeddings by keyed ID). The partner: :mod:`.partner`. The
bank: :mod:`.links` (its partner links), :mod:`.scorer` (versions and one micro-batch's scores), :mod:`.service`
(bounded queue and workers), :mod:`.requests` and :mod:`.http` (the HTTP API), :mod:`.metrics`, :mod:`.run`.
FastAPI and uvicorn are imported only by :mod:`.http` and :mod:`.run` (the ``serve`` extra).
"""
