"""Online joint scoring of a vertical split (``vsplit serve``): the bank's HTTP API and the partners' daemons.

See docs/serving.md. Modules: :mod:`.messages` (the wire messages), :mod:`.model` (a party's saved model, loaded
as batch prediction loads it), :mod:`.partner` (the partner daemon), :mod:`.links`, :mod:`.scorer` and
:mod:`.service` (the bank's core), :mod:`.requests` and :mod:`.http` (the HTTP API), :mod:`.metrics`.
FastAPI and uvicorn are imported only by :mod:`.http` and :mod:`.run` (the ``serve`` extra).
"""
