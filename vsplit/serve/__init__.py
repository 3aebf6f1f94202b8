"""Online joint scoring of a vertical split (``vsplit serve``): the bank's HTTP API and the partners' daemons.

See docs/serving.md. The wire: :mod:`.messages` (frozen dataclasses, keyed IDs, the pair digest), :mod:`.wire`
(frames over a mutual-TLS channel, counted by type), :mod:`.signing` (snapshot signatures). The models:
:mod:`.model` (a party's saved model, loaded as batch prediction loads it), :mod:`.encode` (the bank's fast path
from validated rows to model inputs), :mod:`.numpy_forward` (the bank's small networks in numpy), :mod:`.table`
(embeddings by keyed ID). The partner: :mod:`.partner`. The bank: :mod:`.links` (its partner links), :mod:`.scorer`
(versions and one micro-batch's scores), :mod:`.service` (bounded queue and micro-batching on the event loop),
:mod:`.requests` and :mod:`.http` (the HTTP API; its scoring path outside FastAPI), :mod:`.metrics`, :mod:`.run`.
FastAPI and uvicorn are imported only by :mod:`.http` and :mod:`.run`, orjson (optional) by :mod:`.requests` (the
``serve`` extra).
"""
