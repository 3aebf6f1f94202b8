"""A read-only console each party opens in its browser: its run, its peers, its traffic, its service, live.

:mod:`vsplit.console.state` holds what the party's own process already tracks (filled by ``vsplit train``,
``vsplit pilot``'s parties and ``vsplit serve``); :mod:`vsplit.console.server` serves it on 127.0.0.1 (a token
when bound elsewhere), with a page drawn by uPlot shipped in ``static/``; :mod:`vsplit.console.finished` reads a
finished run's folder for ``vsplit console --runs DIR``. Nothing here writes, and nothing shows a peer's values.
"""
